package proxy_test

import (
	"strings"
	"testing"

	"tau2rl/lib/inference/llmtest"
	"tau2rl/schemas"
)

// TestRewardRange (issue 27 item 2): a finite but huge reward (1e308) was accepted, published, and
// overflowed the trainer's group mean into NaN advantages at every restart. Rewards and call
// rewards outside ±schemas.MaxAbsReward are refused with 400 in OpenAI's error shape, naming the
// field, on /reward and /finish alike; the bounds themselves are accepted.
func TestRewardRange(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	if code, out := h.chat(t, "big", userTurn("hi")); code != 200 {
		t.Fatalf("chat: %d %v", code, out)
	}
	for _, c := range []struct {
		name, path, body, param string
	}{
		{"reward 1e308", "/v1/sessions/big/reward", `{"reward":1e308}`, "reward"},
		{"reward -1.7976931348623157e308", "/v1/sessions/big/reward", `{"reward":-1.7976931348623157e308}`, "reward"},
		{"reward just above", "/v1/sessions/big/reward", `{"reward":1000000.0000000001}`, "reward"},
		{"call reward", "/v1/sessions/big/reward", `{"reward":1,"call_rewards":[1e7]}`, "call_rewards"},
		{"finish reward", "/v1/sessions/big/finish", `{"reward":1e308}`, "reward"},
		{"finish call reward", "/v1/sessions/big/finish", `{"reward":0,"call_rewards":[-1e308]}`, "call_rewards"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := h.do(t, "POST", c.path, "", []byte(c.body))
			e := errorOf(t, out)
			if code != 400 || e["type"] != "invalid_request_error" || e["param"] != c.param {
				t.Fatalf("%s %s: %d %v, want 400 invalid_request_error param %s", c.path, c.body, code, e, c.param)
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, "1e+06") {
				t.Fatalf("message %q does not give the accepted range", msg)
			}
		})
	}
	// The refused rewards left nothing behind: the bounds are accepted and the session finishes.
	if code, out := h.do(t, "POST", "/v1/sessions/big/reward", "", []byte(`{"reward":-1e6,"call_rewards":[1e6]}`)); code != 200 {
		t.Fatalf("reward at the bounds: %d %v", code, out)
	}
	h.finish(t, "big", schemas.MaxAbsReward)
}
