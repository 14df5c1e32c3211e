package banking_knowledge

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

type goldenRun struct {
	Results []string `json:"results"`
	Hash    string   `json:"hash"`
}

func readGolden(t *testing.T, name string) map[string]goldenRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]goldenRun
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// usesUnported reports the first discoverable tool a call list needs that
// has no Go body yet.
func usesUnported(calls []data.Action) string {
	for _, c := range calls {
		if c.Name == "call_discoverable_agent_tool" {
			n, _ := c.Arguments.Get("agent_tool_name")
			if s, _ := n.(string); agentDiscoverable[s] == nil && agentMeta[s] != nil {
				return s
			}
		}
	}
	return ""
}

func newEnv(t testing.TB, task *data.Task) *env.Environment {
	t.Helper()
	e, err := New(env.Options{DataDir: tau2test.DataDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := evaluator.InitializeEnv(e, task); err != nil {
		t.Fatal(err)
	}
	return e
}

func result(e *env.Environment, requestor, name string, args *pyjson.Object) string {
	res, err := e.MakeToolCall(requestor, name, copyObj(args))
	if err != nil {
		return "EXC " + err.Error()
	}
	s, err := env.ToJSONStr(res)
	if err != nil {
		return "EXC " + err.Error()
	}
	return s
}

// TestGoldActionsAgainstReference replays every task's gold actions (after
// its initialization data) and compares each tool result and the final DB
// hash with upstream's tools.py (testdata/golden/tasks.json, written by
// testdata/oracle/harness.py).
func TestGoldActionsAgainstReference(t *testing.T) {
	dir := tau2test.DataDir(t)
	golden := readGolden(t, "tasks.json")
	tasks, err := data.LoadTasks(dir, Domain, data.Head)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 97 {
		t.Fatalf("%d tasks, want 97", len(tasks))
	}
	checked, skipped := 0, map[string]int{}
	for _, task := range tasks {
		g, ok := golden[task.ID]
		if !ok {
			t.Fatalf("no golden for %s", task.ID)
		}
		acts := task.EvaluationCriteria.Actions
		if u := usesUnported(acts); u != "" {
			skipped[u]++
			continue
		}
		e := newEnv(t, task)
		for i, a := range acts {
			got := result(e, a.Requestor, a.Name, a.Arguments)
			want := g.Results[i]
			if strings.HasPrefix(want, "EXC ") {
				if !strings.HasPrefix(got, "EXC ") {
					t.Errorf("task %s action %d (%s): got %q, upstream raised %q", task.ID, i, a.Name, got, want)
				}
				continue
			}
			if got != want {
				t.Errorf("task %s action %d (%s):\n got: %q\nwant: %q", task.ID, i, a.Name, got, want)
			}
		}
		h, _, err := e.Hashes()
		if err != nil {
			t.Fatal(err)
		}
		if h != g.Hash {
			t.Errorf("task %s: DB hash %s, upstream %s", task.ID, h, g.Hash)
		}
		checked++
	}
	t.Logf("%d tasks checked; skipped (discoverable tool not ported yet): %v", checked, skipped)
}

func copyObj(o *pyjson.Object) *pyjson.Object {
	if o == nil {
		return nil
	}
	return pyjson.DeepCopy(o)
}

// TestEveryDiscoverableToolPorted: every discoverable tool of upstream's
// toolkits (discoverable.json) has a Go body, and no body lacks metadata.
func TestEveryDiscoverableToolPorted(t *testing.T) {
	for side, meta := range map[string]map[string]*toolMeta{"agent": agentMeta, "user": userMeta} {
		bodies := agentDiscoverable
		if side == "user" {
			bodies = userDiscoverable
		}
		for name, m := range meta {
			if m.Discoverable && bodies[name] == nil {
				t.Errorf("%s discoverable tool %s has no Go body", side, name)
			}
		}
		for name := range bodies {
			if m := meta[name]; m == nil || !m.Discoverable {
				t.Errorf("%s: Go body %s is not an upstream discoverable tool", side, name)
			}
		}
	}
}
