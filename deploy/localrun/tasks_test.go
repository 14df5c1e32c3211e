package localrun

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/tau2test"
)

// TestGradableLeavesOutUngradableTasks (issue 27 item 15): mock's base split holds a task whose
// env assertion looks up the task_2 its write creates: when the scripted policy skips that write,
// τ²'s assertion raises and the episode is an infrastructure error (make run, make learn-cpu).
// It is set aside with the reason; the tasks with a reward are kept.
func TestGradableLeavesOutUngradableTasks(t *testing.T) {
	dir := tau2test.DataDir(t)
	tasks, err := data.LoadSplit(dir, "mock", data.Head, "base")
	if err != nil {
		t.Fatal(err)
	}
	kept, left, err := gradable(dir, "mock", tasks)
	if err != nil {
		t.Fatal(err)
	}
	why := map[string]string{}
	for _, l := range left {
		why[l.id] = l.why
	}
	if w := why["create_task_1_with_env_assertions"]; !strings.Contains(w, "Task task_2 not found") {
		t.Errorf("create_task_1_with_env_assertions: %q, want it left out as ungradable", w)
	}
	var ids []string
	for _, k := range kept {
		ids = append(ids, k.ID)
	}
	if !slices.Contains(ids, "create_task_1") || len(kept)+len(left) != len(tasks) {
		t.Errorf("kept %v, left %v of %d tasks", ids, left, len(tasks))
	}
	var said strings.Builder
	list, err := runTasks(&said, dir, "mock", "base")
	if err != nil || strings.Contains(list, "create_task_1_with_env_assertions") || !strings.Contains(list, `"create_task_1"`) {
		t.Errorf("runTasks: %s %v", list, err)
	}
	// The run says which task it left out and why.
	if !strings.Contains(said.String(), "create_task_1_with_env_assertions: τ²'s evaluator cannot grade") {
		t.Errorf("runTasks reported:\n%s", said.String())
	}
}

// TestQueryHint (issue 27 item 17): the summary's query needs no DuckDB install: it names
// tau2-query, which make build builds with the other binaries.
func TestQueryHint(t *testing.T) {
	h := queryHint("/r/bin/tau2-query", "/r/run/1/dataset")
	if !strings.HasPrefix(h, "query it") || !strings.Contains(h, "/r/bin/tau2-query dataset=/r/run/1/dataset") {
		t.Errorf("hint %q", h)
	}
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^BINARIES\s*:?=(.*)$`).FindSubmatch(mk)
	if m == nil || !slices.Contains(strings.Fields(string(m[1])), "tau2-query") {
		t.Errorf("the Makefile's BINARIES does not build tau2-query: %q", m)
	}
}

// TestSelectHeldOut: heldout_split resolves the other split's tasks by the same rules (airline's
// test split: tasks none of which is a training task), and the training split itself is refused.
func TestSelectHeldOut(t *testing.T) {
	dir := tau2test.DataDir(t)
	cfg := DefaultExperimentConfig()
	cfg.DataDir, cfg.HeldOutSplit = dir, "test"
	train, err := SelectTasks(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	held, err := SelectHeldOut(cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) == 0 {
		t.Fatal("no held-out tasks on airline's test split")
	}
	for _, id := range held {
		if slices.Contains(train, id) {
			t.Errorf("held-out task %s is also a training task", id)
		}
	}
	cfg.HeldOutSplit = cfg.Split
	if _, err := SelectHeldOut(cfg, io.Discard); err == nil || !strings.Contains(err.Error(), "trains on") {
		t.Errorf("heldout_split = split: err %v, want a refusal", err)
	}
	cfg.HeldOutSplit = ""
	if ids, err := SelectHeldOut(cfg, io.Discard); ids != nil || err != nil {
		t.Errorf("no held-out split: %v, %v", ids, err)
	}
}
