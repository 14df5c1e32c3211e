package telecom

import (
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

func loadSplit(tb testing.TB, split string) []*data.Task {
	tb.Helper()
	tasks, err := data.LoadSplit(tau2test.DataDir(tb), DomainManual, data.Head, split)
	if err != nil {
		tb.Fatal(err)
	}
	return tasks
}

// runGold initializes a fresh environment for t, replays its gold actions
// and checks its env assertions.
func runGold(tb testing.TB, t *data.Task) (errFlags []bool, results []AssertionResult) {
	tb.Helper()
	e, err := env.New(DomainManual, env.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := InitTask(e, t); err != nil {
		tb.Fatal(err)
	}
	errFlags, err = ReplayGold(e, t)
	if err != nil {
		tb.Fatal(err)
	}
	results, err = CheckAssertions(e, t)
	if err != nil {
		tb.Fatal(err)
	}
	return errFlags, results
}

// TestBaseSplitGoldPassesEnvAssertions is "gold scores 1 on ENV_ASSERTION"
// for every task of the base split (114).
func TestBaseSplitGoldPassesEnvAssertions(t *testing.T) {
	tasks := loadSplit(t, "base")
	if len(tasks) != 114 {
		t.Fatalf("base split has %d tasks, want 114", len(tasks))
	}
	for _, task := range tasks {
		flags, res := runGold(t, task)
		for i, f := range flags {
			if f {
				t.Errorf("%s: gold action %d (%s) returned a tool error", task.ID, i, task.EvaluationCriteria.Actions[i].Name)
			}
		}
		if len(res) == 0 {
			t.Errorf("%s: no env assertions", task.ID)
		}
		for _, r := range res {
			if !r.Met {
				t.Errorf("%s: assertion %s not met after gold replay", task.ID, r.FuncName)
			}
		}
	}
}
