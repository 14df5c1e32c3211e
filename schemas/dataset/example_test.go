package dataset_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

// trajectory is a small graded episode of one call.
func trajectory(id, domain, task string, reward float64) *schemas.Trajectory {
	t := &schemas.Trajectory{ID: id, TaskID: task, Domain: domain, Split: "train", Status: schemas.StatusOK,
		Termination: schemas.TerminationAgentStop, Reward: reward,
		StartedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), EndedAt: time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC)}
	if _, err := t.AppendCall(schemas.CallInput{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5}, BehaviorLogprobs: []float32{-0.5, -0.25}}); err != nil {
		panic(err)
	}
	return t
}

// Read the successful retail episodes of an archive, the way `tau2-trainer sft` with
// filter.min_reward=1 (rejection sampling) or tau2-replay selects them. The archive here is
// written with WritePartitioned in the archiver's layout (domain=<d>/date=<day>/), so the airline
// file is skipped without being opened.
func ExampleDataset_Scan() {
	root, err := os.MkdirTemp("", "dataset-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)
	files, err := dataset.WritePartitioned(root, "part-0", []*schemas.Trajectory{
		trajectory("r1", "retail", "3", 1),
		trajectory("r2", "retail", "3", 0),
		trajectory("r3", "retail", "8", 1),
		trajectory("a1", "airline", "12", 1),
	}, schemas.DefaultParquetWriterOptions())
	if err != nil {
		panic(err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		fmt.Println("wrote", filepath.ToSlash(rel))
	}

	d, err := dataset.Open(root) // a directory, a file, or a glob
	if err != nil {
		panic(err)
	}
	one := 1.0
	st, err := d.Scan(context.Background(), dataset.Filter{Domains: []string{"retail"}, MinReward: &one}, func(t *schemas.Trajectory) error {
		fmt.Println("episode", t.ID, "task", t.TaskID, "reward", t.Reward)
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("files read %d, pruned %d; rows read %d, matched %d\n", st.Files, st.FilesPruned, st.RowsRead, st.RowsMatched)
	// Output:
	// wrote domain=airline/date=2026-03-01/part-0.parquet
	// wrote domain=retail/date=2026-03-01/part-0.parquet
	// episode r1 task 3 reward 1
	// episode r3 task 8 reward 1
	// files read 1, pruned 1; rows read 3, matched 2
}
