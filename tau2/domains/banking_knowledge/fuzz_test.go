package banking_knowledge

import (
	"errors"
	"testing"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

// FuzzDiscoverableArguments feeds arbitrary `arguments` strings (the LLM's
// JSON text) to every discoverable tool through the call wrappers: results
// are text or tool errors, never a recovered panic (a Go bug).
func FuzzDiscoverableArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"card_id": "dbc_538bfb9cba"}`, `[1]`, `"x"`, `{"amount": "1e400"}`, `{"user_id": {"a": 1}}`,
		`{"account_id": "03", "amount": -1e308, "credit_type": "fee_refund"}`, `{"pin": "١٢٣٤"}`, `{"months": 1e30}`, `nul`} {
		f.Add(s)
	}
	dir := tau2test.DataDir(f)
	base, err := New(env.Options{DataDir: dir})
	if err != nil {
		f.Fatal(err)
	}
	for name := range agentDiscoverable {
		base.Call(env.Assistant, "unlock_discoverable_agent_tool", pyjson.MustDumps(pyjson.NewObject("agent_tool_name", name)))
	}
	for name := range userDiscoverable {
		base.Call(env.Assistant, "give_discoverable_user_tool", pyjson.MustDumps(pyjson.NewObject("discoverable_tool_name", name)))
	}
	f.Fuzz(func(t *testing.T, args string) {
		e := base.Fork()
		check := func(requestor, tool string, a *pyjson.Object) {
			_, err := e.MakeToolCall(requestor, tool, a)
			var pe *env.PanicError
			if errors.As(err, &pe) {
				t.Fatalf("%s %v: %v\n%s", tool, a, pe, pe.Stack)
			}
		}
		for name := range agentDiscoverable {
			check(env.Assistant, "call_discoverable_agent_tool", pyjson.NewObject("agent_tool_name", name, "arguments", args))
		}
		for name := range userDiscoverable {
			check(env.User, "call_discoverable_user_tool", pyjson.NewObject("discoverable_tool_name", name, "arguments", args))
		}
	})
}
