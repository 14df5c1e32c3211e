package proxy_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tau2rl/lib/inference/llmtest"
	"tau2rl/producers/proxy"
	"tau2rl/producers/rollout"
	"tau2rl/schemas"
)

// errorOf returns the OpenAI error object of an answer, failing when the
// body is not in OpenAI's shape.
func errorOf(tb testing.TB, out map[string]any) map[string]any {
	tb.Helper()
	e, ok := out["error"].(map[string]any)
	if !ok {
		tb.Fatalf("answer is not an OpenAI error: %v", out)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			tb.Fatalf("error object lacks %q: %v", k, e)
		}
	}
	return e
}

func userTurn(text string) map[string]any {
	return map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}}
}

// Malformed and refused requests get OpenAI-shaped errors with the right
// status, and nothing is recorded for them.
func TestBadRequests(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}), func(c *proxy.Config) {
		c.Limits.MaxRequestBytes = 4096
		c.Limits.MaxN = 2
	})
	raw := func(method, path, token, body string) (int, map[string]any) {
		var b any
		if body != "" {
			b = []byte(body)
		}
		return h.do(t, method, path, token, b)
	}
	cases := []struct {
		name              string
		method, path, tok string
		body              string
		status            int
		typ, code         string
	}{
		{"not json", "POST", "/v1/chat/completions", "k;session=a", "{", 400, "invalid_request_error", ""},
		{"no messages", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[]}`, 400, "invalid_request_error", ""},
		{"bad role", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"robot","content":"x"}]}`, 400, "invalid_request_error", ""},
		{"image part", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "invalid_request_error", ""},
		{"tool without id", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"tool","content":"x"}]}`, 400, "invalid_request_error", ""},
		{"bad arguments", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}`, 400, "invalid_request_error", ""},
		{"bad tool", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"retrieval"}]}`, 400, "invalid_request_error", ""},
		{"bad tool_choice", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"always"}`, 400, "invalid_request_error", ""},
		{"n too large", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"user","content":"x"}],"n":3}`, 400, "invalid_request_error", ""},
		{"temperature", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"user","content":"x"}],"temperature":3}`, 400, "invalid_request_error", ""},
		{"max_tokens 0", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"user","content":"x"}],"max_tokens":0}`, 400, "invalid_request_error", ""},
		{"five stops", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]}`, 400, "invalid_request_error", ""},
		{"no session", "POST", "/v1/chat/completions", "k", `{"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", "missing_session"},
		{"bad trial", "POST", "/v1/chat/completions", "k;session=a;trial=x", `{"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", ""},
		{"bad domain", "POST", "/v1/chat/completions", "k;session=a;domain=..%2Fetc", `{"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error", ""},
		{"oversize", "POST", "/v1/chat/completions", "k;session=a", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "invalid_request_error", "request_too_large"},
		{"wrong method", "GET", "/v1/chat/completions", "k;session=a", "", 405, "invalid_request_error", ""},
		{"unknown route", "POST", "/v1/embeddings", "k", `{}`, 404, "not_found_error", ""},
		{"unknown model", "GET", "/v1/models/gpt-4", "k", "", 404, "invalid_request_error", "model_not_found"},
		{"reward unknown session", "POST", "/v1/sessions/nope/reward", "k", `{"reward":1}`, 404, "not_found_error", "session_not_found"},
		{"finish unknown session", "POST", "/v1/sessions/nope/finish", "k", `{"reward":1}`, 404, "not_found_error", "session_not_found"},
		{"abort unknown session", "POST", "/v1/sessions/nope/abort", "k", `{"error":"x"}`, 404, "not_found_error", "session_not_found"},
		{"reward without value", "POST", "/v1/sessions/nope/reward", "k", `{}`, 400, "invalid_request_error", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := raw(tc.method, tc.path, tc.tok, tc.body)
			e := errorOf(t, out)
			if code != tc.status || e["type"] != tc.typ || (tc.code != "" && e["code"] != tc.code) {
				t.Fatalf("%d %v, want %d %s %s", code, e, tc.status, tc.typ, tc.code)
			}
		})
	}
	if n := len(h.got.all()); n != 0 {
		t.Fatalf("the policy server was called %d times for refused requests", n)
	}
	if code, out := h.do(t, "GET", "/v1/models", "k", nil); code != 200 || out["object"] != "list" {
		t.Fatalf("models: %d %v", code, out)
	}
}

// API keys: a wrong or missing key is a 401 in OpenAI's shape.
func TestAuthentication(t *testing.T) {
	t.Setenv("TAU2_PROXY_TEST_KEYS", "sk-a, sk-b")
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}), func(c *proxy.Config) {
		c.Auth = proxy.AuthConfig{APIKeysEnv: "TAU2_PROXY_TEST_KEYS"}
	})
	for _, tok := range []string{"", "sk-c;session=x", "session=x"} {
		code, out := h.do(t, "POST", "/v1/chat/completions", tok, userTurn("hi"))
		if e := errorOf(t, out); code != 401 || e["type"] != "authentication_error" {
			t.Fatalf("token %q: %d %v", tok, code, e)
		}
	}
	if code, out := h.do(t, "POST", "/v1/chat/completions", "sk-b;session=x", userTurn("hi")); code != 200 {
		t.Fatalf("good key: %d %v", code, out)
	}
	// A session belongs to the key that opened it.
	if code, out := h.do(t, "POST", "/v1/chat/completions", "sk-a;session=x", userTurn("hi")); code != 409 || errorOf(t, out)["code"] != "session_taken" {
		t.Fatalf("another key's session: %d %v", code, out)
	}
	if code, out := h.do(t, "POST", "/v1/sessions/x/reward", "sk-a", map[string]any{"reward": 1}); code != 404 {
		t.Fatalf("reward with another key: %d %v", code, out)
	}
	if code, out := h.do(t, "POST", "/v1/sessions/x/reward", "sk-b", map[string]any{"reward": 1}); code != 200 {
		t.Fatalf("reward with the session's key: %d %v", code, out)
	}
}

// Sessions end once: a second finish, a reward or a call after the finish
// are refused (410 Gone, final: the OpenAI SDKs retry a 409), and exactly
// one trajectory is published.
func TestFinishExactlyOnce(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	if code, out := h.chat(t, "once", userTurn("hi")); code != 200 {
		t.Fatalf("chat: %d %v", code, out)
	}
	if code, out := h.do(t, "POST", "/v1/sessions/once/finish", "", map[string]any{}); code != 400 || errorOf(t, out)["param"] != "reward" {
		t.Fatalf("finish without a reward: %d %v", code, out)
	}
	if code, out := h.do(t, "POST", "/v1/sessions/once/reward", "", map[string]any{"reward": 1, "call_rewards": []float64{1, 2}}); code != 400 {
		t.Fatalf("call_rewards of the wrong length: %d %v", code, out)
	}
	if code, out := h.do(t, "POST", "/v1/sessions/once/reward", "", map[string]any{"reward": 0.25, "call_rewards": []float64{0.5}}); code != 200 {
		t.Fatalf("reward: %d %v", code, out)
	}
	h.finish(t, "once", 0.75)
	for _, c := range []struct{ path, body string }{
		{"/v1/sessions/once/finish", `{"reward":1}`}, {"/v1/sessions/once/reward", `{"reward":1}`}, {"/v1/sessions/once/abort", `{"error":"x"}`},
	} {
		code, out := h.do(t, "POST", c.path, "", []byte(c.body))
		if e := errorOf(t, out); code != 410 || e["code"] != "session_ended" {
			t.Fatalf("%s after finish: %d %v", c.path, code, e)
		}
	}
	if code, out := h.chat(t, "once", userTurn("again")); code != 410 || errorOf(t, out)["code"] != "session_ended" {
		t.Fatalf("call after finish: %d %v", code, out)
	}
	trajs := trajectories(t, h.kc, 2, 3*time.Second)
	if len(trajs) != 1 {
		t.Fatalf("%d trajectories published, want exactly 1", len(trajs))
	}
	if tr := trajs[0]; tr.Reward != 0.75 || tr.Calls[0].ShapedReward != 0.5 {
		t.Fatalf("reward %v, call reward %v: want the finish's 0.75 and the per-call 0.5", tr.Reward, tr.Calls[0].ShapedReward)
	}
}

// A dead policy server: the call fails with 503 in OpenAI's shape, nothing
// is recorded, the session stays usable.
func TestDeadPolicyServer(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	if code, _ := h.chat(t, "dead", userTurn("hi")); code != 200 {
		t.Fatal("first call failed")
	}
	h.llm.FailNext(10, http.StatusServiceUnavailable)
	code, out := h.chat(t, "dead", map[string]any{"messages": []any{
		map[string]any{"role": "user", "content": "hi"}, map[string]any{"role": "assistant", "content": "ok"},
		map[string]any{"role": "user", "content": "more"}}})
	if e := errorOf(t, out); code != 503 || e["type"] != "server_error" || e["code"] != "policy_unavailable" {
		t.Fatalf("dead server: %d %v", code, e)
	}
	h.llm.Close()
	if code, out := h.chat(t, "dead", userTurn("hi")); code != 503 {
		t.Fatalf("closed server: %d %v", code, out)
	}
	_, info := h.do(t, "GET", "/v1/sessions/dead", "", nil)
	if info["calls"] != float64(1) || info["status"] != "open" {
		t.Fatalf("session after failures: %v", info)
	}
}

// Sessions that never finish expire with an infra-errors record, never a
// trajectory; aborted sessions likewise.
func TestExpiryAndAbort(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}), func(c *proxy.Config) { c.SessionTTL = time.Hour })
	for _, sid := range []string{"idle", "aborted", "busy"} {
		if code, out := h.chat(t, sid, userTurn("hi")); code != 200 {
			t.Fatalf("%s: %d %v", sid, code, out)
		}
	}
	if code, out := h.do(t, "POST", "/v1/sessions/aborted/abort", "", map[string]any{"error": "tool backend down"}); code != 200 || out["status"] != "aborted" {
		t.Fatalf("abort: %d %v", code, out)
	}
	h.srv.Expire(context.Background(), time.Now().Add(30*time.Minute))
	if h.srv.OpenSessions() != 2 {
		t.Fatalf("%d open sessions before the ttl", h.srv.OpenSessions())
	}
	h.srv.Expire(context.Background(), time.Now().Add(2*time.Hour))
	if h.srv.OpenSessions() != 0 {
		t.Fatalf("%d open sessions after the ttl", h.srv.OpenSessions())
	}
	ies := infraErrors(t, h.kc, 4, 5*time.Second)
	stages := map[string]int{}
	for _, ie := range ies {
		stages[ie.Stage]++
		if ie.Partial == nil || ie.Partial.Status != "infra_error" || len(ie.Partial.Calls) != 0 {
			t.Fatalf("infra error %s: partial %+v", ie.Stage, ie.Partial)
		}
	}
	if len(ies) != 3 || stages["proxy_client_abort"] != 1 || stages["proxy_session_expired"] != 2 {
		t.Fatalf("infra errors by stage %v (%d records)", stages, len(ies))
	}
	if trajs := trajectories(t, h.kc, 1, time.Second); len(trajs) != 0 {
		t.Fatalf("%d trajectories published for sessions that never finished", len(trajs))
	}
	if code, out := h.do(t, "POST", "/v1/sessions/idle/reward", "", map[string]any{"reward": 1}); code != 410 {
		t.Fatalf("reward after expiry: %d %v", code, out)
	}
}

// Limits: sessions, calls per session, context length.
func TestLimits(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}), func(c *proxy.Config) {
		c.Limits.MaxSessions = 2
		c.Limits.MaxCallsPerSession = 2
		c.EngineMaxTokens = 40
	})
	for _, sid := range []string{"a", "b"} {
		if code, out := h.chat(t, sid, userTurn("hi")); code != 200 {
			t.Fatalf("%s: %d %v", sid, code, out)
		}
	}
	if code, out := h.chat(t, "c", userTurn("hi")); code != 429 || errorOf(t, out)["code"] != "too_many_sessions" {
		t.Fatalf("third session: %d %v", code, out)
	}
	if code, out := h.chat(t, "a", userTurn("hi")); code != 200 {
		t.Fatalf("second call: %d %v", code, out)
	}
	if code, out := h.chat(t, "a", userTurn("hi")); code != 429 || errorOf(t, out)["code"] != "session_call_limit" {
		t.Fatalf("third call: %d %v", code, out)
	}
	code, out := h.chat(t, "b", userTurn(strings.Repeat("long ", 50)))
	if e := errorOf(t, out); code != 400 || e["code"] != "context_length_exceeded" {
		t.Fatalf("prompt over engine_max_tokens: %d %v", code, e)
	}
}

// failingPublisher fails its first publishes, then publishes through next
// (the real Kafka writer).
type failingPublisher struct {
	next  rollout.Publisher
	fails atomic.Int32
}

func (f *failingPublisher) PublishFramed(ctx context.Context, msgs ...schemas.Framed) error {
	if f.fails.Add(-1) >= 0 {
		return errors.New("injected: broker unreachable")
	}
	return f.next.PublishFramed(ctx, msgs...)
}

// A finish whose publish fails answers 503 and leaves the session open; the
// retried finish publishes it, once.
func TestPublishFailureRetried(t *testing.T) {
	var fp *failingPublisher
	h := newHarnessWrap(t, llmtest.Constant(llmtest.Reply{Content: "ok"}), func(p rollout.Publisher) rollout.Publisher {
		fp = &failingPublisher{next: p}
		fp.fails.Store(1)
		return fp
	})
	if code, _ := h.chat(t, "retry", userTurn("hi")); code != 200 {
		t.Fatal("chat failed")
	}
	code, out := h.do(t, "POST", "/v1/sessions/retry/finish", "", map[string]any{"reward": 1})
	if e := errorOf(t, out); code != 503 || e["code"] != "publish_failed" {
		t.Fatalf("failed publish: %d %v", code, e)
	}
	if _, info := h.do(t, "GET", "/v1/sessions/retry", "", nil); info["status"] != "open" {
		t.Fatalf("session after a failed publish: %v", info)
	}
	h.finish(t, "retry", 1)
	if trajs := trajectories(t, h.kc, 2, 3*time.Second); len(trajs) != 1 {
		t.Fatalf("%d trajectories, want 1", len(trajs))
	}
}
