package step

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"tau2rl/schemas"
	"tau2rl/schemas/report"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/trajtest"
)

// groupMsgs frames each group as one message on partition 0; every group is its own rollout
// request (RequestID "req-<task>"), as the producers tag them and report.Diagnose groups them.
func groupMsgs(t *testing.T, groups map[string][]float64, order []string) ([]Message, []*schemas.Trajectory) {
	t.Helper()
	var msgs []Message
	var all []*schemas.Trajectory
	for i, task := range order {
		o := trajtest.Default()
		o.RequestID = "req-" + task
		g, err := trajtest.Group(o, task, uint64(i+1), groups[task])
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, Message{Trajectories: g, Topic: "traj", Partition: 0, Offset: int64(i)})
		all = append(all, g...)
	}
	return msgs, all
}

// TestEqualRewardBatchTakesNoStep (issue 30, "In CI"): a trainer fed only groups whose members
// all have the same reward (all succeed or all fail: no GRPO signal) takes no step — no update of
// the weights, no version, no checkpoint, no step record — and counts every one of their episodes
// as filtered_equal_rewards; with actor.advantage.drop_equal_rewards=false the same groups are
// trained, so the filter, not a stall elsewhere, is what held the steps back.
func TestEqualRewardBatchTakesNoStep(t *testing.T) {
	equal := map[string][]float64{"0": {1, 1, 1, 1}, "1": {0, 0, 0, 0}, "2": {1, 1, 1, 1}, "3": {0, 0, 0, 0}}
	order := []string{"0", "1", "2", "3"}
	msgs, _ := groupMsgs(t, equal, order)

	cfg := testConfig(t)
	cfg.MaxSteps = 2
	be := newBackend(t)
	before := exportWeights(t, be)
	tr, err := New(cfg, Deps{Backend: be, Source: newMemSource(msgs)})
	if err != nil {
		t.Fatal(err)
	}
	filtered := tr.d.Metrics.Groups.WithLabelValues("filtered_equal_rewards")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { // stop once every group was filtered (or the minute is up: the checks below fail)
		for counterValue(t, filtered) < 4 && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // a step, were one wrongly due, would be taken by now
		cancel()
	}()
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n := counterValue(t, filtered); n != 4 {
		t.Fatalf("%v groups filtered, want 4", n)
	}
	if tr.Step() != 0 || tr.Version() != 0 {
		t.Fatalf("step %d, version %d: want no step", tr.Step(), tr.Version())
	}
	if name, i := firstDiff(before, exportWeights(t, be)); name != "" {
		t.Fatalf("the weights changed at %s[%d] without a step", name, i)
	}
	if _, err := steplog.Read(cfg.Checkpoint.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a step log was written (%v)", err)
	}
	if ents, _ := os.ReadDir(cfg.Checkpoint.Dir); len(ents) != 0 {
		t.Fatalf("checkpoint directory holds %d entries", len(ents))
	}
	acct := tr.Accounting()
	if acct["episodes_received"] != 16 || acct["discarded_filtered_equal_rewards"] != 16 || acct["episodes_pending"] != 0 {
		t.Fatalf("accounting %v: want 16 received, 16 filtered_equal_rewards, none pending", acct)
	}

	// The same groups with the filter off are trained: B=2 groups per step.
	keep := testConfig(t)
	keep.MaxSteps = 2
	keep.Actor.Advantage.DropEqualRewards = false
	tr2, err := New(keep, Deps{Backend: newBackend(t), Source: newMemSource(msgs)})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr2)
	recs, err := steplog.Read(keep.Checkpoint.Dir)
	if err != nil || tr2.Step() != 2 || len(recs) != 2 {
		t.Fatalf("filter off: %d steps, %d records (%v), want 2", tr2.Step(), len(recs), err)
	}
	for _, r := range recs {
		if r.Metrics["discarded_filtered_equal_rewards"] != 0 || r.Metrics["episodes"] != 8 {
			t.Errorf("filter off, step %d: %v", r.Step, r.Metrics)
		}
	}
}

// TestDiagnosisMatchesTrainerAccounting: the report's two views of one GRPO stage agree — the
// trainer's step log (report.Account: filtered_equal_rewards in episodes, trained episodes) and
// the archive's per task × version diagnosis (report.Diagnose: groups of equal rewards) — on the
// trainer's own run; per-task rows add up to the total, and the filtered tasks are exactly those
// whose groups the diagnosis calls equal, with no advantage.
func TestDiagnosisMatchesTrainerAccounting(t *testing.T) {
	groups := map[string][]float64{
		"e0": {1, 1, 1, 1}, "e1": {0, 0, 0, 0}, "e2": {1, 1, 1, 1}, // equal: filtered
		"i0": {1, 0, 1, 0}, "i1": {1, 0, 0, 0}, "i2": {0, 1, 1, 1}, "i3": {1, 1, 0, 0}, // informative: trained
	}
	order := []string{"e0", "i0", "e1", "i1", "e2", "i2", "i3"}
	msgs, all := groupMsgs(t, groups, order)
	cfg := testConfig(t)
	cfg.MaxSteps = 2 // 4 informative groups, B=2: every episode is trained or filtered
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: newMemSource(msgs)})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	recs, err := steplog.Read(cfg.Checkpoint.Dir)
	if err != nil {
		t.Fatal(err)
	}
	acct := report.Account(recs, len(all))
	if acct.Trained != 16 || acct.Discarded["filtered_equal_rewards"] != 12 || len(acct.Discarded) != 1 {
		t.Fatalf("accounting %+v: want 16 trained and 12 filtered_equal_rewards, nothing else", acct)
	}
	d := report.Diagnose(all)
	if d.Total.Groups != 7 || d.Total.EqualGroups != 3 || d.Total.Episodes != 28 {
		t.Fatalf("diagnosis total %+v: want 7 groups of which 3 equal, 28 episodes", d.Total)
	}
	if got := d.Total.EqualGroups * 4; got != acct.Discarded["filtered_equal_rewards"] {
		t.Errorf("diagnosis: %d episodes in equal-reward groups, trainer filtered %d", got, acct.Discarded["filtered_equal_rewards"])
	}
	if got := (d.Total.Groups - d.Total.EqualGroups) * 4; got != acct.Trained {
		t.Errorf("diagnosis: %d episodes in informative groups, trainer trained %d", got, acct.Trained)
	}
	var episodes, successes, eq int
	for _, c := range d.Tasks {
		episodes, successes, eq = episodes+c.Episodes, successes+c.Successes, eq+c.EqualGroups
		task := c.Task[len("airline/"):]
		wantEqual := task[0] == 'e'
		if (c.EqualGroups == 1) != wantEqual || wantEqual && (c.AdvAbsMean != 0 || c.AdvStd != 0) || !wantEqual && c.AdvAbsMean == 0 {
			t.Errorf("task %s: %+v", c.Task, c)
		}
		var s int
		for _, r := range groups[task] {
			if r == 1 {
				s++
			}
		}
		if c.Successes != s || c.Success != float64(s)/4 {
			t.Errorf("task %s: %d successes (rate %v), want %d", c.Task, c.Successes, c.Success, s)
		}
	}
	if episodes != d.Total.Episodes || successes != d.Total.Successes || eq != d.Total.EqualGroups {
		t.Errorf("per-task rows sum to %d episodes, %d successes, %d equal groups; total %+v", episodes, successes, eq, d.Total)
	}
	if len(d.Tasks) != len(order) {
		t.Errorf("%d task rows, want %d", len(d.Tasks), len(order))
	}
}
