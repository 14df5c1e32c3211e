package step

import (
	"slices"
	"testing"

	"tau2rl/schemas"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/trajtest"
)

// TestEpisodeAccountingAddsUp feeds the trainer every kind of trajectory it leaves out (an
// infrastructure error, a stale one, a redelivered duplicate, a group of equal rewards, a group
// that completes below min_size) and checks that the step log says where each one went: the sum
// of episodes_received is the trained episodes plus every discarded_<reason> plus what the
// trainer still holds, exactly.
func TestEpisodeAccountingAddsUp(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 3
	msgs := groupMessages(t, []string{"0", "1", "2", "3", "4", "5", "6"}, 0, 0)
	infra := *msgs[0].Trajectories[0]
	infra.ID, infra.Status, infra.Error = "infra-1", schemas.StatusInfraError, "user simulator unreachable"
	stale := *msgs[1].Trajectories[0]
	stale.ID = "stale-1"
	stale.Calls = slices.Clone(stale.Calls)
	stale.Calls[0].VersionRuns = schemas.UniformVersion(-5, len(stale.Calls[0].CompletionTokens))
	equal, err := trajtest.Group(trajtest.Default(), "9", 99, []float64{1, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	// Task 8: one trainable member and three infrastructure errors complete a group below
	// min_size 2.
	few, err := trajtest.Group(trajtest.Default(), "8", 98, []float64{1, 0, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range few[1:] {
		f.Status, f.Error = schemas.StatusInfraError, "tool server down"
	}
	extra := []Message{
		{Trajectories: []*schemas.Trajectory{&infra, &stale, msgs[2].Trajectories[0]}, Topic: "traj", Partition: 1, Offset: 0},
		{Trajectories: equal, Topic: "traj", Partition: 1, Offset: 1},
		{Trajectories: few, Topic: "traj", Partition: 1, Offset: 2},
	}
	all := append(extra, msgs...)
	sent := 0
	for _, m := range all {
		sent += len(m.Trajectories)
	}
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: newMemSource(all)})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	recs, err := steplog.Read(cfg.Checkpoint.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d step records, want 3", len(recs))
	}
	sum := map[string]float64{}
	for _, r := range recs {
		for k, v := range r.Metrics {
			sum[k] += v
		}
	}
	// What arrived after the last record (none here: the trainer stops at max_steps) is still
	// counted by Accounting.
	rest := tr.Accounting()
	for k, v := range rest {
		if k != "episodes_pending" {
			sum[k] += v
		}
	}
	pending := rest["episodes_pending"]
	// The trainer stops at max_steps with the last messages unread.
	if sum["episodes_received"] < 12 || sum["episodes_received"] > float64(sent) {
		t.Errorf("received %v of the %d sent", sum["episodes_received"], sent)
	}
	out := sum["episodes"] + pending
	for _, r := range AccountingReasons {
		out += sum["discarded_"+r]
	}
	if out != sum["episodes_received"] {
		t.Errorf("trained %v + discarded + pending %v = %v, want received %v (%v)", sum["episodes"], pending, out, sum["episodes_received"], sum)
	}
	want := map[string]float64{
		"discarded_infra_error": 4, "discarded_stale": 1, "discarded_duplicate": 1,
		"discarded_filtered_equal_rewards": 4, "discarded_too_few_trainable": 1,
	}
	for k, v := range want {
		if sum[k] != v {
			t.Errorf("%s = %v, want %v", k, sum[k], v)
		}
	}
	if sum["episodes"] < 3*2*3 || pending == 0 {
		t.Errorf("trained %v, pending %v: want at least 3 steps of 2 groups of ≥ 3 and a group left over", sum["episodes"], pending)
	}
}
