package proxy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/inference/chattemplate"
)

// A tool-using loop driven from Go over HTTP: the recorded trajectory is
// token-exact and its conversation is what the client saw.
func TestToolLoopTokenExact(t *testing.T) {
	e := airlineEnv(t)
	h := newHarness(t, airlineScript())
	tools := toolSchemas(e)
	msgs := []any{
		map[string]any{"role": "system", "content": "You are an airline agent."},
		map[string]any{"role": "user", "content": "What are my reservations? I am " + airlineUser},
	}
	var seen []map[string]any
	for turn := 0; turn < 6; turn++ {
		code, out := h.chat(t, "s1", map[string]any{"messages": msgs, "tools": tools})
		if code != http.StatusOK {
			t.Fatalf("turn %d: %d %v", turn, code, out)
		}
		choice := out["choices"].([]any)[0].(map[string]any)
		msg := choice["message"].(map[string]any)
		if c, _ := msg["content"].(string); strings.Contains(c, chattemplate.IMEnd) {
			t.Fatalf("content carries the stop token: %q", c)
		}
		seen = append(seen, msg)
		msgs = append(msgs, msg)
		tcs, _ := msg["tool_calls"].([]any)
		if len(tcs) == 0 {
			if choice["finish_reason"] != "stop" {
				t.Fatalf("finish_reason %v", choice["finish_reason"])
			}
			break
		}
		if choice["finish_reason"] != "tool_calls" {
			t.Fatalf("finish_reason %v with tool calls", choice["finish_reason"])
		}
		for _, tc := range tcs {
			f := tc.(map[string]any)["function"].(map[string]any)
			res, _ := e.Call("assistant", f["name"].(string), f["arguments"].(string))
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": tc.(map[string]any)["id"], "content": res})
		}
	}
	if len(seen) != 3 {
		t.Fatalf("%d assistant turns, want 3", len(seen))
	}
	last := seen[2]
	if last["reasoning_content"] != fakeToolCallInThinking || last["tool_calls"] != nil {
		t.Fatalf("a tool call inside <think> must stay reasoning: %v", jsonString(last))
	}
	h.finish(t, "s1", 1)
	trajs := trajectories(t, h.kc, 1, 10*time.Second)
	if len(trajs) != 1 {
		t.Fatalf("%d trajectories", len(trajs))
	}
	got := archive(t, trajs)[0]
	checkTokenExact(t, h.tok, got, h.got.all(), nil)
	if got.Reward != 1 || got.TaskID != "s1" || len(got.Messages) != len(msgs) {
		t.Fatalf("reward %v task %q, %d messages, want %d", got.Reward, got.TaskID, len(got.Messages), len(msgs))
	}
	raw, _ := json.Marshal(msgs)
	var want []map[string]any
	_ = json.Unmarshal(raw, &want)
	for i, m := range got.Messages {
		w := want[i]
		if string(m.Role) != w["role"] || m.Content != orEmpty(w["content"]) {
			t.Fatalf("message %d: %s %q, the client had %v %q", i, m.Role, m.Content, w["role"], w["content"])
		}
	}
}

func orEmpty(v any) string {
	s, _ := v.(string)
	return s
}
