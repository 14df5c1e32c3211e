package step

import (
	"context"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/checkpoint"
)

func stepLRs(t *testing.T, dir string) []float64 {
	t.Helper()
	recs, err := steplog.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, r := range recs {
		lr, ok := r.Metrics["lr"]
		if !ok {
			t.Fatalf("step %d record has no lr: %v", r.Step, r.Metrics)
		}
		out = append(out, lr)
	}
	return out
}

// runUntilStep runs tr until it has taken n steps, then stops it as a signal would (its
// shutdown checkpoint covers the steps), not by max_steps, which sets the schedule's length.
func runUntilStep(t *testing.T, tr *Trainer, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		for tr.Step() < n && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
	}()
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestScheduleRecordedAndResumed: a GRPO run with a warmed-up cosine schedule steps at the
// schedule's rates over max_steps and records each in steps.jsonl as lr; a run stopped after 2 of
// its 3 steps and restored from its checkpoint takes step 3 at the uninterrupted run's rate and
// ends with its weights, bit for bit.
func TestScheduleRecordedAndResumed(t *testing.T) {
	msgs := groupMessages(t, []string{"0", "1", "2", "3", "4", "5"}, 0, 0) // 3 steps of B=2
	config := func() Config {
		cfg := testConfig(t)
		cfg.MaxSteps = 3
		cfg.Actor.Optimizer.LRSchedule, cfg.Actor.Optimizer.WarmupSteps, cfg.Actor.Optimizer.MinLRRatio = gpu.ScheduleCosine, 1, 0.1
		return cfg
	}
	straight := config()
	beA := newBackend(t)
	trA, err := New(straight, Deps{Backend: beA, Source: newMemSource(msgs)})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, trA)
	want := stepLRs(t, straight.Checkpoint.Dir)
	if len(want) != 3 {
		t.Fatalf("%d steps recorded, want 3", len(want))
	}
	o := straight.Actor.Optimizer
	for k, lr := range want {
		if lr != o.LRAt(int64(k), 3) {
			t.Errorf("step %d: lr %v, want %v", k+1, lr, o.LRAt(int64(k), 3))
		}
	}
	// Warm-up to lr over 1 step, then a cosine from lr over the 2 steps left: halfway at step 3.
	if want[0] != o.LR || want[1] != o.LR || want[2] != o.LR*0.55 {
		t.Errorf("lr %v: want %v, %v, %v", want, o.LR, o.LR, o.LR*0.55)
	}

	stopped := config()
	trB, err := New(stopped, Deps{Backend: newBackend(t), Source: newMemSource(msgs[:8])}) // 2 steps' groups
	if err != nil {
		t.Fatal(err)
	}
	runUntilStep(t, trB, 2)
	m := &checkpoint.Manager{Dir: stopped.Checkpoint.Dir, Keep: stopped.Checkpoint.Keep}
	dir, st, ok, _, err := m.Latest()
	if err != nil || !ok || st.Step != 2 {
		t.Fatalf("checkpoint %s %+v %v %v", dir, st, ok, err)
	}
	be, err := cpu.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if restored, err := m.LoadOptimizer(dir, st, be); err != nil || !restored {
		t.Fatalf("optimizer state restored %v: %v", restored, err)
	}
	trC, err := New(stopped, Deps{Backend: be, Source: newMemSource(msgs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := trC.Restore(st); err != nil {
		t.Fatal(err)
	}
	runTrainer(t, trC)
	got := stepLRs(t, stopped.Checkpoint.Dir) // steps 1–2 of the first process, 3 of the second
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("resumed run's lr %v, uninterrupted %v", got, want)
	}
	if name, i := firstDiff(exportWeights(t, beA), exportWeights(t, be)); name != "" {
		t.Fatalf("resumed run's weights differ from the uninterrupted run's at %s[%d]", name, i)
	}
}

// TestConstantScheduleRecordsLR: without schedule keys every step runs at actor.optimizer.lr,
// and steps.jsonl says so.
func TestConstantScheduleRecordsLR(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 2
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: newMemSource(groupMessages(t, []string{"0", "1", "2", "3"}, 0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	for k, lr := range stepLRs(t, cfg.Checkpoint.Dir) {
		if lr != cfg.Actor.Optimizer.LR {
			t.Errorf("step %d: lr %v, want %v", k+1, lr, cfg.Actor.Optimizer.LR)
		}
	}
}

// TestDecayNeedsMaxSteps: a decaying schedule on a trainer that runs until stopped is refused
// when the trainer is built, saying what to set.
func TestDecayNeedsMaxSteps(t *testing.T) {
	cfg := testConfig(t)
	cfg.Actor.Optimizer.LRSchedule = gpu.ScheduleLinear
	_, err := New(cfg, Deps{Backend: newBackend(t), Source: newMemSource(nil)})
	if err == nil || !strings.Contains(err.Error(), "max_steps is 0 (unbounded)") {
		t.Fatalf("err %v", err)
	}
}
