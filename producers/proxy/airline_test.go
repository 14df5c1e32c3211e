package proxy_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/tau2/domains/airline"
	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

// airlineUser is a τ² airline user with several reservations.
const airlineUser = "mia_li_3668"

// airlineEnv is a fresh τ² airline environment (skips without the data).
func airlineEnv(tb testing.TB) *env.Environment {
	tb.Helper()
	e, err := airline.New(env.Options{DataDir: tau2test.DataDir(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// toolSchemas are the environment's OpenAI tool schemas.
func toolSchemas(e *env.Environment) []json.RawMessage {
	var out []json.RawMessage
	for _, t := range e.Tools() {
		out = append(out, json.RawMessage(t.Schema))
	}
	return out
}

// toolServer serves the environment's tools on loopback for a client in
// another process: GET /tools (the schemas), POST /call {"name",
// "arguments"} → the tool's result text, as τ² would answer it.
func toolServer(tb testing.TB, e *env.Environment) string {
	tb.Helper()
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tools", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(toolSchemas(e))
	})
	mux.HandleFunc("POST /call", func(w http.ResponseWriter, r *http.Request) {
		var c struct{ Name, Arguments string }
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		content, _ := e.Call("assistant", c.Name, c.Arguments)
		mu.Unlock()
		_, _ = w.Write([]byte(content))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// fakeToolCallInThinking is reasoning that contains a well-formed tool call:
// Qwen3's reasoning parser must keep it thinking (AReaL #736).
const fakeToolCallInThinking = "I could call\n<tool_call>\n{\"name\": \"cancel_reservation\", \"arguments\": {\"reservation_id\": \"ZZZZZZ\"}}\n</tool_call>\nbut the user did not ask for that."

// airlineScript plays a small support agent: look the user up, read two
// reservations in parallel, answer (with thinking that contains a tool
// call); "please continue" gets "Done.".
func airlineScript() llmtest.Script {
	return llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		last := c.LastMessage()
		switch {
		case last.Role == chattemplate.RoleUser && strings.Contains(last.Content, "continue"):
			return llmtest.Reply{Content: "Done."}, nil
		case last.Role == chattemplate.RoleUser:
			return llmtest.Reply{Reasoning: "Look the user up first.", ToolCalls: []llmtest.ToolCall{
				{Name: "get_user_details", Arguments: map[string]any{"user_id": airlineUser}}}}, nil
		case last.Role == chattemplate.RoleTool:
			var u struct {
				Reservations []string `json:"reservations"`
			}
			if json.Unmarshal([]byte(last.Content), &u) == nil && len(u.Reservations) >= 2 {
				return llmtest.Reply{Content: "Let me read two of your reservations.", ToolCalls: []llmtest.ToolCall{
					{Name: "get_reservation_details", Arguments: map[string]any{"reservation_id": u.Reservations[0]}},
					{Name: "get_reservation_details", Arguments: map[string]any{"reservation_id": u.Reservations[1]}}}}, nil
			}
			return llmtest.Reply{Reasoning: fakeToolCallInThinking, Content: "I found both reservations; they are confirmed."}, nil
		}
		return llmtest.Reply{Content: "How can I help?"}, nil
	})
}
