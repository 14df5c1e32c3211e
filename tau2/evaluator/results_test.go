package evaluator_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

// fixture is a small results file in pydantic's indent=2 layout with
// unknown fields, one simulation without reward_info and one with it.
func fixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "results_mock.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestResultsRewriteKeepsEverythingElse(t *testing.T) {
	b := fixture(t)
	r, err := evaluator.ParseResults(b)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := r.Domain(); d != "mock" || r.NumTrials() != 1 || r.Solo() || len(r.Sims) != 3 || len(r.TaskSpans) != 2 {
		t.Fatalf("parsed: domain %q trials %d sims %d tasks %d", d, r.NumTrials(), len(r.Sims), len(r.TaskSpans))
	}
	// No replacement: identical bytes.
	out, err := r.Rewrite(make([][]byte, len(r.Sims)))
	if err != nil || !bytes.Equal(out, b) {
		t.Fatalf("identity rewrite changed the file (%v)", err)
	}
	_, sims, err := evaluator.Regrade(ctx, r, evaluator.RegradeOptions{Options: evaluator.Options{DataDir: tau2test.DataDir(t)}})
	if err != nil {
		t.Fatal(err)
	}
	repl := make([][]byte, len(sims))
	for i, s := range sims {
		if s.Err != nil {
			t.Fatalf("sim %d: %v", i, s.Err)
		}
		if repl[i], err = r.EncodeRewardInfo(i, s.New); err != nil {
			t.Fatal(err)
		}
	}
	out, err = r.Rewrite(repl)
	if err != nil {
		t.Fatal(err)
	}
	// The output parses, every simulation has the new reward info, and the
	// file without reward_info values equals the input without them.
	r2, err := evaluator.ParseResults(out)
	if err != nil {
		t.Fatalf("rewritten file: %v\n%s", err, out)
	}
	for i := range r2.Sims {
		s, err := r2.Simulation(i)
		if err != nil {
			t.Fatal(err)
		}
		want := sims[i].New.ToValue()
		if got, _ := pyjson.DumpsSorted(s.RewardInfo); got != mustSorted(t, want) {
			t.Errorf("sim %d: reward_info %s, want %s", i, got, mustSorted(t, want))
		}
	}
	if strip(t, out) != strip(t, b) {
		t.Errorf("content besides reward_info changed:\n%s", out)
	}
	// The inserted key sits before "messages", indented like its siblings.
	if !strings.Contains(string(out), "\"user_cost\": 0.0045,\n      \"reward_info\": {\n        \"reward\": 0.0,\n        \"db_check\": {\n          \"db_match\": false,") {
		t.Errorf("insertion layout:\n%s", out)
	}
}

func mustSorted(t testing.TB, v any) string {
	s, err := pyjson.DumpsSorted(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// strip returns the file's sort_keys dump without any reward_info.
func strip(t testing.TB, b []byte) string {
	v, err := pyjson.Loads(string(b))
	if err != nil {
		t.Fatal(err)
	}
	sims, _ := v.(*pyjson.Object).Get("simulations")
	for _, s := range sims.([]any) {
		s.(*pyjson.Object).Delete("reward_info")
	}
	return mustSorted(t, v)
}

func TestResultsCompactStyles(t *testing.T) {
	ri := []byte(`{"reward": 1.0}`)
	for _, c := range []struct{ in, want string }{
		{`{"info":{},"tasks":[],"simulations":[{"id":"a","messages":[]}]}`,
			`{"info":{},"tasks":[],"simulations":[{"id":"a","reward_info":{"reward": 1.0},"messages":[]}]}`},
		{`{"info": {}, "tasks": [], "simulations": [{"id": "a", "trial": 0}]}`,
			`{"info": {}, "tasks": [], "simulations": [{"id": "a", "trial": 0, "reward_info": {"reward": 1.0}}]}`},
		{`{"info": {}, "tasks": [], "simulations": [{"id": "a", "reward_info": null}], "x": [1e5, NaN]}`,
			`{"info": {}, "tasks": [], "simulations": [{"id": "a", "reward_info": {"reward": 1.0}}], "x": [1e5, NaN]}`},
	} {
		r, err := evaluator.ParseResults([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		out, err := r.Rewrite([][]byte{ri})
		if err != nil || string(out) != c.want {
			t.Errorf("%s:\n got %s\nwant %s (%v)", c.in, out, c.want, err)
		}
	}
}

func TestResultsErrors(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `{"info": {}}`, `{"tasks": []}`, `{"info": {}, "tasks": [], "simulations": [1]}`,
		`{"info": {}, "tasks": [], "simulations": [{}]}`, `{"info": {}, "tasks": []} x`,
		`{"info": {}, "tasks": [], "simulations": [{"id": "a",}]}`, `{"info": {}, "tasks": [], "simulations": [{"id": "a" "b": 1}]}`,
		`{"info": 1, "tasks": []}`, `{"info": {}, "tasks": [], "x": tru}`, `{"info": {}, "tasks": [], "x": "\u0001` + "\x01" + `"}`,
	} {
		if _, err := evaluator.ParseResults([]byte(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
	r, err := evaluator.ParseResults([]byte(`{"info": {}, "tasks": [{"id": 3}], "simulations": [{"id": "a", "task_id": "t", "termination_reason": "done"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Task(0); err == nil {
		t.Error("bad task accepted")
	}
	if _, err := r.Simulation(0); err == nil {
		t.Error("bad termination reason accepted")
	}
	if _, err := r.Domain(); err == nil {
		t.Error("missing domain accepted")
	}
}

// FuzzParseResults: any input gives a Results or an error, never a panic,
// and an identity rewrite reproduces the input; parsed simulations and
// tasks either validate or fail cleanly.
func FuzzParseResults(f *testing.F) {
	f.Add(fixture(f))
	f.Add([]byte(`{"info": {"environment_info": {"domain_name": "mock"}}, "tasks": [], "simulations": [{"id": "a", "task_id": "t", "termination_reason": "user_stop", "messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "1", "name": "f", "arguments": {}}]}, {"role": "tool", "id": "1", "content": "x"}]}]}`))
	f.Add([]byte(`{"info":{},"tasks":[],"simulations":[{"id":"a","reward_info":null}]}`))
	f.Add([]byte(`{"info": {}, "tasks": [{"id": "1", "user_scenario": {"instructions": "x"}}], "simulations": []}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := evaluator.ParseResults(b)
		if err != nil {
			return
		}
		out, err := r.Rewrite(make([][]byte, len(r.Sims)))
		if err != nil || !bytes.Equal(out, b) {
			t.Fatalf("identity rewrite: %v", err)
		}
		for i := range r.TaskSpans {
			r.Task(i)
		}
		repl := make([][]byte, len(r.Sims))
		for i := range r.Sims {
			r.Simulation(i)
			repl[i] = []byte(`{"reward": 1.0}`)
		}
		out, err = r.Rewrite(repl)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := evaluator.ParseResults(out); err != nil {
			t.Fatalf("rewritten file does not parse: %v\n%s", err, out)
		}
	})
}

// FuzzParseMessage: message validation never panics.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{
		`{"role": "assistant", "content": "hi", "tool_calls": null}`,
		`{"role": "user", "content": null, "tool_calls": [{"id": "1", "name": "f", "arguments": {"a": 1}, "requestor": "user"}]}`,
		`{"role": "tool", "id": "1", "content": "x", "requestor": "assistant", "error": false}`,
		`{"role": "tool", "tool_messages": [{"role": "tool", "id": "1", "content": "x"}]}`,
		`{"role": "system", "content": "x"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := pyjson.Loads(s)
		if err != nil {
			return
		}
		m, err := evaluator.ParseMessage(v)
		if err == nil {
			m.IsToolCall()
			m.HasTextContent()
		}
	})
}

// FuzzParseJudgeReply: any judge reply parses or errors cleanly.
func FuzzParseJudgeReply(f *testing.F) {
	f.Add(`{"results": [{"expectedOutcome": "a", "reasoning": "r", "metExpectation": true}]}`)
	f.Add(`{"results": "x"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		evaluator.ParseJudgeReply(s)
	})
}
