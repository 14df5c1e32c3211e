package retail

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

type replayTask struct {
	DBHash       string `json:"db_hash"`
	ErrorActions []int  `json:"error_actions"`
	OutputsHash  string `json:"outputs_hash"`
}

type replayGolden struct {
	PristineHash string                `json:"pristine_hash"`
	Head         map[string]replayTask `json:"head"`
	V021         map[string]replayTask `json:"v0.2.1"`
}

// replayGold applies a task's gold actions like τ²'s evaluator
// (make_tool_call; errors are recorded and otherwise ignored). It returns
// the indexes of the failing actions and the sha256 of
// json.dumps([[content, error], ...]) over all action outputs, as the
// oracle computes it.
func replayGold(e *env.Environment, task *data.Task) ([]int, string, error) {
	var failed []int
	outputs := []any{}
	if task.EvaluationCriteria != nil {
		for i, a := range task.EvaluationCriteria.Actions {
			res, err := e.MakeToolCall(a.Requestor, a.Name, a.Arguments)
			var content string
			if err == nil {
				content, err = env.ToJSONStr(res)
			}
			if err != nil {
				failed = append(failed, i)
				content = "Error: " + err.Error()
			}
			outputs = append(outputs, []any{content, err != nil})
		}
	}
	s, err := pyjson.Dumps(outputs)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256([]byte(s))
	return failed, hex.EncodeToString(sum[:]), nil
}

func readReplayGolden(t testing.TB) replayGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "gold_replay.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g replayGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGoldActionReplay replays the gold actions of every retail task (HEAD
// and v0.2.1) on a fresh environment. Every action output, the set of
// failing actions (some gold actions are lookups that fail in τ² too) and
// the final DB hash must equal what τ²'s own tools produce
// (testdata/golden/gold_replay.json), and a second replay must reach the
// same state.
func TestGoldActionReplay(t *testing.T) {
	dir, _ := realBase(t)
	golden := readReplayGolden(t)
	if golden.PristineHash != realPristineHash {
		t.Fatalf("pristine hash %s in golden, %s in test", golden.PristineHash, realPristineHash)
	}
	pristine, err := env.New(Domain, env.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name   string
		ver    data.Version
		golden map[string]replayTask
	}{{"head", data.Head, golden.Head}, {"v0.2.1", data.V021, golden.V021}} {
		tasks, err := data.LoadTasks(dir, Domain, v.ver)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != 114 || len(v.golden) != 114 {
			t.Fatalf("%s: %d tasks, %d goldens, want 114", v.name, len(tasks), len(v.golden))
		}
		writes := 0
		for _, task := range tasks {
			want, ok := v.golden[task.ID]
			if !ok {
				t.Fatalf("%s task %s: no golden", v.name, task.ID)
			}
			var envs [2]*env.Environment
			for k := range envs {
				e, err := env.New(Domain, env.Options{DataDir: dir})
				if err != nil {
					t.Fatal(err)
				}
				failed, outputs, err := replayGold(e, task)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(failed, want.ErrorActions) {
					t.Errorf("%s task %s: failing actions %v, want %v", v.name, task.ID, failed, want.ErrorActions)
				}
				if outputs != want.OutputsHash {
					t.Errorf("%s task %s: action outputs differ from τ²'s", v.name, task.ID)
				}
				envs[k] = e
			}
			h := tau2test.CheckReplays(t, v.name+" task "+task.ID, envs[0], envs[1], want.DBHash)
			changed := h != realPristineHash
			if changed {
				writes++
			}
			same, err := env.SameState(envs[0], pristine)
			if err != nil || same == changed {
				t.Errorf("%s task %s: SameState(replay, pristine)=%v (%v) but DB changed=%v", v.name, task.ID, same, err, changed)
			}
		}
		if writes != 103 { // 104 tasks write; one task's only write fails in τ² too
			t.Errorf("%s: %d tasks change the DB, want 103", v.name, writes)
		}
	}
}
