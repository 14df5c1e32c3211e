package step

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tau2rl/trainer/offsets"
	"tau2rl/trainer/trajtest"
)

// TestTokenOutsideVocabularyIsExcluded: a trajectory holding a token id the model cannot embed
// (written by another model or tokenizer) is excluded from its group like an infrastructure
// error. Before, the step rejected its whole batch ("token … outside vocabulary"), the trainer
// exited, and it failed again on every restart because the message's offset was never committed.
func TestTokenOutsideVocabularyIsExcluded(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 1
	b := newBackend(t)
	vocab := b.Config().VocabSize
	var msgs []Message
	for i, task := range []string{"a", "b"} {
		trajs, err := trajtest.Group(trajtest.Default(), task, uint64(i+1), []float64{0, 1, 0.5, 1})
		if err != nil {
			t.Fatal(err)
		}
		if task == "a" {
			c := &trajs[2].Calls[len(trajs[2].Calls)-1]
			c.CompletionTokens[0] = int32(vocab) // one past the last id
		}
		msgs = append(msgs, Message{Trajectories: trajs, Topic: "traj", Partition: 0, Offset: int64(i)})
	}
	src := newMemSource(msgs)
	m, _ := NewMetrics(nil)
	tr, err := New(cfg, Deps{Backend: b, Source: src, Reloader: &recorder{}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Run(ctx); err != nil {
		t.Fatalf("trainer failed on a trajectory outside the vocabulary: %v", err)
	}
	if tr.Step() != 1 {
		t.Fatalf("step %d, want 1", tr.Step())
	}
	if got, want := src.lastCommit(), []offsets.Target{{Topic: "traj", Partition: 0, Next: 2}}; !slices.Equal(got, want) {
		t.Fatalf("last commit %v, want %v (the excluded episode's message committed with its group)", got, want)
	}
	for verdict, want := range map[string]float64{"accepted": 7, "out_of_vocabulary": 1} {
		if got := testutil.ToFloat64(m.Trajectories.WithLabelValues(verdict)); got != want {
			t.Errorf("trajectories %s: %v, want %v", verdict, got, want)
		}
	}
}
