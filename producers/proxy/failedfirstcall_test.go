package proxy_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/inference/llmtest"
	"tau2rl/producers/proxy"
)

// A request that fails before anything is recorded opens no session: a
// 400 found after the prompt is rendered (context_length_exceeded, a
// prompt that leaves no room) or a policy server that cannot answer. Found
// from outside: each such request with a new session id left an open
// session of 0 calls that held a limits.max_sessions slot for session_ttl
// and then published an infra-errors record "(session X, 0 calls)" on
// expiry or shutdown — noise on the operators' topic for an episode that
// never started. A session that has recorded a call stays open through a
// failed call (it has a conversation to finish).
func TestFailedFirstCallOpensNoSession(t *testing.T) {
	long := strings.Repeat("hello ", 200) // ~200 tokens: under the byte bound, over engine_max_tokens
	for _, api := range []string{"chat", "responses"} {
		t.Run(api, func(t *testing.T) {
			h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}), func(c *proxy.Config) {
				c.EngineMaxTokens = 128
				c.MaxNewTokens = 16
			})
			call := func(sid, text string) (int, map[string]any) {
				if api == "chat" {
					return h.chat(t, sid, userTurn(text))
				}
				code, out, _ := h.postResponses(t, "sk-unused;session="+sid, map[string]any{"input": text})
				return code, out
			}
			if code, out := call("too-long", long); code != 400 || errorOf(t, out)["code"] != "context_length_exceeded" {
				t.Fatalf("long prompt: %d %v", code, out)
			}
			h.llm.FailNext(2, http.StatusServiceUnavailable) // the harness policy client tries twice
			if code, out := call("policy-down", "hi"); code != 503 {
				t.Fatalf("policy down: %d %v", code, out)
			}
			if n := h.srv.OpenSessions(); n != 0 {
				t.Fatalf("%d sessions open after two failed first calls, want 0", n)
			}
			for _, sid := range []string{"too-long", "policy-down"} {
				if code, out := h.do(t, "GET", "/v1/sessions/"+sid, "", nil); code != 404 {
					t.Fatalf("GET session %s: %d %v, want 404", sid, code, out)
				}
			}
			// The id is usable afterwards: the next call opens the session.
			if code, out := call("policy-down", "hi"); code != 200 {
				t.Fatalf("retry after the policy came back: %d %v", code, out)
			}
			// A session with a recorded call stays open through a failed one.
			if code, out := call("policy-down", long); code != 400 {
				t.Fatalf("long prompt in an open session: %d %v", code, out)
			}
			if code, out := h.do(t, "GET", "/v1/sessions/policy-down", "", nil); code != 200 || out["calls"] != float64(1) {
				t.Fatalf("session with one call after a failed call: %d %v", code, out)
			}
			h.srv.Expire(context.Background(), time.Now().Add(2*time.Hour))
			ies := infraErrors(t, h.kc, 2, 2*time.Second) // waits for a second record that must not come
			if len(ies) != 1 || !strings.Contains(ies[0].Error, "session policy-down, 1 calls") {
				t.Fatalf("infra errors after expiry: %+v, want one for policy-down's one call", ies)
			}
		})
	}
}
