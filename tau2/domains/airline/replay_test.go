package airline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

type replayGolden map[string]map[string]struct {
	DBHash       string `json:"db_hash"`
	ErrorActions []int  `json:"error_actions"`
}

// replayGold applies a task's gold actions like τ²'s evaluator (errors are
// recorded and otherwise ignored) and returns the indexes that failed.
func replayGold(e *env.Environment, t *data.Task) []int {
	var failed []int
	if t.EvaluationCriteria == nil {
		return nil
	}
	for i, a := range t.EvaluationCriteria.Actions {
		if _, err := e.MakeToolCall(a.Requestor, a.Name, a.Arguments); err != nil {
			failed = append(failed, i)
		}
	}
	return failed
}

// TestGoldActionReplay replays the gold actions of every airline task (HEAD
// and v0.2.1) on a fresh environment: no action may fail, and the DB hash
// must equal the one τ²'s own tools produce (testdata/golden/gold_replay.json)
// and be the same when replayed again.
func TestGoldActionReplay(t *testing.T) {
	dir, _ := realBase(t)
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "gold_replay.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden replayGolden
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name string
		ver  data.Version
	}{{"head", data.Head}, {"v0.2.1", data.V021}} {
		tasks, err := data.LoadTasks(dir, "airline", v.ver)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 50 {
			t.Fatalf("%s: %d tasks, want 50", v.name, len(tasks))
		}
		pristine, err := env.New("airline", env.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			want, ok := golden[v.name][task.ID]
			if !ok {
				t.Fatalf("%s task %s: no golden", v.name, task.ID)
			}
			var envs [2]*env.Environment
			for k := range envs {
				e, err := env.New("airline", env.Options{DataDir: dir})
				if err != nil {
					t.Fatal(err)
				}
				if failed := replayGold(e, task); !slices.Equal(failed, want.ErrorActions) {
					t.Errorf("%s task %s: failing actions %v, want %v", v.name, task.ID, failed, want.ErrorActions)
				}
				envs[k] = e
			}
			h := tau2test.CheckReplays(t, v.name+" task "+task.ID, envs[0], envs[1], want.DBHash)
			// SameState against the pristine env agrees with the hashes.
			ph, _, _ := pristine.Hashes()
			same, err := env.SameState(envs[0], pristine)
			if err != nil || same != (ph == h) {
				t.Errorf("%s task %s: SameState(replay, pristine)=%v (%v) but hashes equal=%v", v.name, task.ID, same, err, ph == h)
			}
		}
	}
}
