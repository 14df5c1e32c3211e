package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/tau2/domains/banking_knowledge"
	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

// bankingEnv is a fresh τ² banking_knowledge environment under a retrieval
// configuration (skips without the data).
func bankingEnv(tb testing.TB, retrieval string) *env.Environment {
	tb.Helper()
	e, err := banking_knowledge.New(env.Options{DataDir: tau2test.DataDir(tb), Retrieval: retrieval})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// bankingScript searches the knowledge base with whichever lookup tool the
// request offers (KB_search, else grep), then answers from the result.
func bankingScript() llmtest.Script {
	return llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		switch last := c.LastMessage(); last.Role {
		case chattemplate.RoleUser:
			call := llmtest.ToolCall{Name: "grep", Arguments: map[string]any{"pattern": "annual fee"}}
			if slices.Contains(c.ToolNames(), "KB_search") {
				call = llmtest.ToolCall{Name: "KB_search", Arguments: map[string]any{"query": "Gold Rewards Card annual fee"}}
			}
			return llmtest.Reply{Reasoning: "Look the card's terms up first.", ToolCalls: []llmtest.ToolCall{call}}, nil
		case chattemplate.RoleTool:
			return llmtest.Reply{Content: "I found the card's terms in our knowledge base."}, nil
		}
		return llmtest.Reply{Content: "How can I help?"}, nil
	})
}

// TestBankingKnowledgeSession: an outside agent on τ²'s banking_knowledge
// through the proxy, per retrieval configuration. Its tools (the domain's
// and the configuration's lookup tool) come from the environment, its tool
// calls are executed over the loopback tool server (as the node clients
// do), the session names domain=banking_knowledge in its bearer token; the
// trajectory lands in that partition, token-exact, with the knowledge-base
// listing the server returned as the tool message.
func TestBankingKnowledgeSession(t *testing.T) {
	for _, tc := range []struct{ retrieval, lookup, absent string }{
		{"bm25", "KB_search", "grep"},
		{"grep_only", "grep", "KB_search"},
	} {
		t.Run(tc.retrieval, func(t *testing.T) {
			e := bankingEnv(t, tc.retrieval)
			tools := toolSchemas(e)
			var names []string
			for _, tl := range e.Tools() {
				names = append(names, tl.Name)
			}
			if !slices.Contains(names, tc.lookup) || slices.Contains(names, tc.absent) {
				t.Fatalf("%s offers %v", tc.retrieval, names)
			}
			srv := toolServer(t, e)
			h := newHarness(t, bankingScript())
			token := "sk-unused;session=b1;task=task_001;domain=banking_knowledge"
			msgs := []any{
				map[string]any{"role": "system", "content": e.Policy},
				map[string]any{"role": "user", "content": "Does the Gold Rewards Card have an annual fee?"},
			}
			var lookupResult string
			for turn := 0; turn < 4; turn++ {
				code, out := h.do(t, http.MethodPost, "/v1/chat/completions", token, map[string]any{"model": "qwen3-policy", "messages": msgs, "tools": tools})
				if code != http.StatusOK {
					t.Fatalf("turn %d: %d %v", turn, code, out)
				}
				msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
				msgs = append(msgs, msg)
				tcs, _ := msg["tool_calls"].([]any)
				if len(tcs) == 0 {
					break
				}
				for _, tc := range tcs {
					f := tc.(map[string]any)["function"].(map[string]any)
					res := callToolServer(t, srv, f["name"].(string), f["arguments"].(string))
					lookupResult = res
					msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": tc.(map[string]any)["id"], "content": res})
				}
			}
			if !strings.Contains(lookupResult, "ID: doc_") {
				t.Fatalf("%s returned no documents: %.300q", tc.lookup, lookupResult)
			}
			h.finish(t, "b1", 1)
			trajs := trajectories(t, h.kc, 1, 10*time.Second)
			if len(trajs) != 1 {
				t.Fatalf("%d trajectories", len(trajs))
			}
			got := archive(t, trajs)[0]
			checkTokenExact(t, h.tok, got, h.got.all(), nil)
			if got.Domain != "banking_knowledge" || got.TaskID != "task_001" || len(got.Messages) != len(msgs) {
				t.Fatalf("domain %q task %q, %d messages, want banking_knowledge task_001 and %d", got.Domain, got.TaskID, len(got.Messages), len(msgs))
			}
			var calls []string
			for _, m := range got.Messages {
				for _, c := range m.ToolCalls {
					calls = append(calls, c.Name)
				}
				if m.Role == "tool" && m.Content != lookupResult {
					t.Errorf("tool message differs from the tool server's result")
				}
			}
			if !slices.Equal(calls, []string{tc.lookup}) {
				t.Errorf("tool calls %v, want [%s]", calls, tc.lookup)
			}
		})
	}
}

// callToolServer executes one tool call on toolServer.
func callToolServer(tb testing.TB, url, name, args string) string {
	tb.Helper()
	body, _ := json.Marshal(map[string]string{"Name": name, "Arguments": args})
	resp, err := http.Post(url+"/call", "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("tool server: %d %v %s", resp.StatusCode, err, b)
	}
	return string(b)
}
