package report

import (
	"encoding/json"
	"fmt"
	"testing"

	"tau2rl/schemas"
	"tau2rl/schemas/steplog"
)

func ptr(v float64) *float64 { return &v }

// episode is a graded trajectory of task t in rollout request req, started under version v.
func episode(id, task, req string, v int64, reward float64) *schemas.Trajectory {
	tr := &schemas.Trajectory{ID: id, Domain: "airline", TaskID: task, RequestID: req, PolicyVersionStart: v,
		Reward: reward, Status: schemas.StatusOK, Calls: []schemas.LLMCall{{CompletionTokens: make([]int32, 10)}}}
	if reward < 1 {
		tr.Breakdown = schemas.RewardBreakdown{DB: ptr(0), Communicate: ptr(1)}
	}
	return tr
}

// TestDiagnosisAddsUp: the per task rows add up to the total and the task × version cells to
// each task's row (episodes, successes, groups, equal-reward groups, failures), equal-reward
// groups are counted as such, and the failure kinds come from the reward breakdown.
func TestDiagnosisAddsUp(t *testing.T) {
	var trajs []*schemas.Trajectory
	add := func(task, req string, v int64, rewards ...float64) {
		for i, r := range rewards {
			trajs = append(trajs, episode(fmt.Sprintf("%s-%d", req, i), task, req, v, r))
		}
	}
	add("1", "r1", 0, 1, 0, 1, 0) // informative
	add("1", "r2", 0, 0, 0, 0, 0) // equal: all fail
	add("1", "r3", 1, 1, 1, 1, 1) // equal: all succeed
	add("2", "r4", 0, 1, 0, 0, 0)
	add("2", "r5", 2, 0, 0, 0, 0) // equal
	malformed := episode("m", "2", "r6", 2, 0)
	malformed.Breakdown = schemas.RewardBreakdown{}
	malformed.InvalidFormatTurns = 1
	trajs = append(trajs, malformed, episode("m2", "2", "r6", 2, 1))
	infra := episode("x", "2", "r6", 2, 0)
	infra.Status = schemas.StatusInfraError
	trajs = append(trajs, infra)

	d := Diagnose(trajs)
	if got := d.Total; got.Episodes != 22 || got.Successes != 8 || got.Groups != 6 || got.EqualGroups != 3 {
		t.Fatalf("total %+v: want 22 episodes, 8 successes, 6 groups of which 3 of equal rewards", got)
	}
	if d.Total.Failures[FailDB] != 13 || d.Total.Failures[FailMalformed] != 1 || d.Total.Failures[FailCommunicate] != 0 {
		t.Errorf("failures %v: want db 13, malformed 1, no communicate", d.Total.Failures)
	}
	sumCells := func(cells []Cell) Cell {
		s := Cell{Failures: map[string]int{}}
		for _, c := range cells {
			s.Episodes += c.Episodes
			s.Successes += c.Successes
			s.Groups += c.Groups
			s.EqualGroups += c.EqualGroups
			for k, v := range c.Failures {
				s.Failures[k] += v
			}
		}
		return s
	}
	same := func(what string, a, b Cell) {
		t.Helper()
		if a.Episodes != b.Episodes || a.Successes != b.Successes || a.Groups != b.Groups || a.EqualGroups != b.EqualGroups ||
			fmt.Sprint(a.Failures) != fmt.Sprint(b.Failures) {
			t.Errorf("%s: %+v, want %+v", what, a, b)
		}
	}
	same("tasks vs total", sumCells(d.Tasks), d.Total)
	for _, task := range d.Tasks {
		var cells []Cell
		for _, c := range d.Cells {
			if c.Task == task.Task {
				cells = append(cells, c)
			}
		}
		same("cells of "+task.Task, sumCells(cells), task)
	}
	if len(d.Cells) != 4 || d.Cells[0].Task != "airline/1" || d.Cells[0].Version != 0 || d.Cells[0].EqualGroups != 1 || d.Cells[0].Success != 0.25 {
		t.Errorf("cells %+v", d.Cells)
	}
	// Advantages: task 1 v0 has one informative group (±0.5) and one equal one (0).
	if c := d.Cells[0]; c.AdvAbsMean != 0.25 || c.GenTokens != 10 {
		t.Errorf("task 1 v0 advantage |a| %v, tokens %v: want 0.25, 10", c.AdvAbsMean, c.GenTokens)
	}
}

// TestAccountAddsUp: the reasons of the accounting add up exactly to produced − trained, the
// trainer's duplicates stay outside, and what the trainer did not see by its last step is in
// flight at the end; a step log that does not match the archive shows as unaccounted.
func TestAccountAddsUp(t *testing.T) {
	recs := []steplog.Record{
		{Step: 1, Metrics: map[string]float64{"episodes": 8, "episodes_received": 20, "discarded_filtered_equal_rewards": 8,
			"discarded_stale": 1, "discarded_duplicate": 1, "discarded_infra_error": 0, "episodes_pending": 2}},
		{Step: 2, Metrics: map[string]float64{"episodes": 8, "episodes_received": 10, "discarded_too_few_trainable": 1, "episodes_pending": 3}},
	}
	a := Account(recs, 35)
	sum := 0
	for _, r := range a.Reasons() {
		sum += a.Discarded[r]
	}
	if a.Trained != 16 || sum != 35-16 || a.DuplicateCopies != 1 {
		t.Fatalf("%+v: want 16 trained, reasons adding up to 19, 1 duplicate", a)
	}
	// received 30 − 1 duplicate = 29 distinct consumed; 35 − 29 = 6 never consumed + 3 pending.
	if a.Discarded[InFlightAtEnd] != 9 || a.Discarded[Unaccounted] != 0 || a.TrainedShare != 16.0/35 {
		t.Errorf("%+v", a)
	}
	if r := a.Reasons(); r[0] != InFlightAtEnd || r[1] != "filtered_equal_rewards" {
		t.Errorf("reasons in order %v", r)
	}
	// An archive with fewer episodes than the trainer consumed (a restarted trainer).
	if b := Account(recs, 20); b.Discarded[Unaccounted] != 20-16-(8+1+1+3) {
		t.Errorf("short archive: %+v", b)
	}
	if _, err := json.Marshal(a); err != nil {
		t.Fatal(err)
	}
}
