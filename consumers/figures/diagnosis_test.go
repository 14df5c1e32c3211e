package figures

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/trainer/trajtest"
)

// The fixture archive of TestTaskTableGolden: two airline tasks, three policy versions, one
// rollout request (a group of 4) per task and version, with these rewards.
var fixtureGroups = []struct {
	task    string
	version int64
	rewards []float64
}{
	{"1", 0, []float64{1, 0, 0, 0}},
	{"1", 1, []float64{1, 1, 0, 0}},
	{"1", 2, []float64{1, 1, 1, 1}}, // equal rewards
	{"2", 0, []float64{0, 0, 0, 0}}, // equal rewards
	{"2", 1, []float64{0, 1, 0, 0}},
	{"2", 2, []float64{1, 1, 1, 0}},
}

var fixtureArchive = filepath.Join("testdata", "archive")

// writeFixtureArchive writes the fixture archive (with -update): the groups above, failures
// that the reward breakdown explains (task 1: the database; task 2: a missing action, one
// malformed turn), an infrastructure error (no reward: left out) and, in a second file, a
// re-archived copy of one episode (counted once).
func writeFixtureArchive(t *testing.T) {
	zero := 0.0
	var all []*schemas.Trajectory
	for i, g := range fixtureGroups {
		o := trajtest.Default()
		o.Version, o.RequestID = g.version, fmt.Sprintf("req-%s-v%d", g.task, g.version)
		trajs, err := trajtest.Group(o, g.task, uint64(i+1), g.rewards)
		if err != nil {
			t.Fatal(err)
		}
		for j, tr := range trajs {
			tr.ID = fmt.Sprintf("t%s-v%d-%d", g.task, g.version, j)
			if tr.Reward < 1 {
				if g.task == "1" {
					tr.Breakdown.DB = &zero
				} else {
					tr.Breakdown.Action = &zero
				}
			}
		}
		all = append(all, trajs...)
	}
	all[16].InvalidFormatTurns = 1 // task 2, v1, a failure
	infra := *all[0]
	infra.ID, infra.Status, infra.Error = "infra-1", schemas.StatusInfraError, "user simulator unreachable"
	all = append(all, &infra)
	if err := os.RemoveAll(fixtureArchive); err != nil {
		t.Fatal(err)
	}
	opts := schemas.DefaultParquetWriterOptions()
	if err := dataset.WriteFile(filepath.Join(fixtureArchive, "domain=airline", "part-0.parquet"), all, opts); err != nil {
		t.Fatal(err)
	}
	if err := dataset.WriteFile(filepath.Join(fixtureArchive, "domain=airline", "part-1.parquet"), all[5:6], opts); err != nil {
		t.Fatal(err)
	}
}

// TestTaskTableGolden (issue 30, "In CI"): the per task × policy version table of a known
// archive (testdata/archive, read as tau2-eval plot and the report read one) gives the success
// rates its groups were written with, counts the equal-reward groups, and matches its golden
// (testdata/archive/cells.golden.json) in every column: advantages, tokens, failure kinds.
func TestTaskTableGolden(t *testing.T) {
	if *update {
		writeFixtureArchive(t)
	}
	in, head, err := FromArchive(context.Background(), fixtureArchive, dataset.Filter{}, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Tasks) != len(fixtureGroups) {
		t.Fatalf("%d cells (%s), want %d", len(in.Tasks), head, len(fixtureGroups))
	}
	for i, g := range fixtureGroups {
		c := in.Tasks[i]
		var s int
		equal := true
		for _, r := range g.rewards {
			if r == 1 {
				s++
			}
			equal = equal && r == g.rewards[0]
		}
		if c.Task != "airline/"+g.task || c.Version != g.version || c.Episodes != 4 || c.Successes != s ||
			c.Success != float64(s)/4 || c.Groups != 1 || (c.EqualGroups == 1) != equal {
			t.Errorf("cell %d: %+v, want task %s v%d: 4 episodes, %d successes, equal %v", i, c, g.task, g.version, s, equal)
		}
	}
	got, err := json.MarshalIndent(in.Tasks, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join(fixtureArchive, "cells.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("cells differ from %s:\n%s", golden, got)
	}
}
