package banking_knowledge

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/evaluator/goldgen"
	"tau2rl/tau2/tau2test"
)

// TestGradeGoldAndDropLastWrite grades, through the evaluator (DB replay of
// the trajectory's mutating calls, gold environment, ACTION checks), every
// task's gold trajectory (reward 1) and its trajectory without the last
// mutating gold action: DB match exactly when upstream's tools give the
// same DB hash (drop_last_write_hash of testdata/golden/tasks.json).
func TestGradeGoldAndDropLastWrite(t *testing.T) {
	dir := tau2test.DataDir(t)
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]struct {
		Hash     string `json:"hash"`
		DropHash string `json:"drop_last_write_hash"`
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	tasks, err := data.LoadTasks(dir, Domain, data.Head)
	if err != nil {
		t.Fatal(err)
	}
	g := &goldgen.Generator{Domain: Domain, DataDir: dir}
	gr, err := evaluator.NewGrader(evaluator.Options{Domain: Domain, DataDir: dir, Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		for _, v := range []goldgen.Variant{goldgen.Gold, goldgen.DropLastWrite} {
			if !g.Applicable(task, v) {
				continue
			}
			run, err := g.Build(task, v, 0)
			if err != nil {
				t.Fatal(err)
			}
			ri, err := gr.Evaluate(context.Background(), task, run.Messages, run.Termination)
			if err != nil {
				t.Fatalf("task %s %s: %v", task.ID, v, err)
			}
			if ri.Reward == nil {
				t.Fatalf("task %s %s: reward not evaluated", task.ID, v)
			}
			gd := golden[task.ID]
			switch v {
			case goldgen.Gold:
				if *ri.Reward != 1 {
					t.Errorf("task %s gold: reward %v (%+v)", task.ID, *ri.Reward, ri.DBCheck)
				}
			case goldgen.DropLastWrite:
				if gd.DropHash == "" {
					t.Fatalf("task %s: no drop_last_write golden", task.ID)
				}
				if slices.Contains(task.EvaluationCriteria.RewardBasis, data.RewardDB) {
					want := gd.DropHash == gd.Hash
					if ri.DBCheck == nil || ri.DBCheck.DBMatch != want {
						t.Errorf("task %s drop_last_write: DB match %+v, upstream hashes equal: %v", task.ID, ri.DBCheck, want)
					}
				}
			}
		}
	}
}
