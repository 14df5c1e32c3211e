package sft

import (
	"context"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/checkpoint"
)

// cancelAt is a log handler that cancels a run once it logs "sft step" number n: a run stopped
// from outside (a signal) rather than by max_steps, which would change the schedule's length.
type cancelAt struct {
	n      int64
	cancel context.CancelFunc
}

func (c cancelAt) Enabled(context.Context, slog.Level) bool { return true }
func (c cancelAt) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c cancelAt) WithGroup(string) slog.Handler            { return c }
func (c cancelAt) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "sft step" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "step" && a.Value.Int64() == c.n {
				c.cancel()
			}
			return true
		})
	}
	return nil
}

func lrsOf(t *testing.T, out string) []float64 {
	t.Helper()
	recs, err := steplog.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var lrs []float64
	for _, r := range recs {
		lr, ok := r.Metrics["lr"]
		if !ok {
			t.Fatalf("step %d record has no lr: %v", r.Step, r.Metrics)
		}
		lrs = append(lrs, lr)
	}
	return lrs
}

func scheduled(src, out string) Config {
	cfg := testConfig(src, out)
	cfg.Epochs = 2
	cfg.Optimizer.LRSchedule, cfg.Optimizer.WarmupSteps, cfg.Optimizer.MinLRRatio = gpu.ScheduleCosine, 2, 0.1
	return cfg
}

// TestScheduleInStepLog: every step of an SFT run with a warmed-up cosine schedule trains at the
// schedule's rate over the run's known step count, which steps.jsonl records as lr.
func TestScheduleInStepLog(t *testing.T) {
	src, _ := archive(t)
	out := filepath.Join(t.TempDir(), "sft")
	cfg := scheduled(src, out)
	trajs, _, err := Load(context.Background(), &cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	be, err := cpu.NewRandom(gpu.TinyConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), cfg, be, trajs, 0, quiet)
	if err != nil {
		t.Fatal(err)
	}
	lrs := lrsOf(t, out)
	if int64(len(lrs)) != res.TotalSteps || res.TotalSteps < 5 {
		t.Fatalf("%d lr records for %d steps (want ≥ 5 steps)", len(lrs), res.TotalSteps)
	}
	for k, lr := range lrs {
		if want := cfg.Optimizer.LRAt(int64(k), res.TotalSteps); lr != want {
			t.Errorf("step %d: lr %v, want %v", k+1, lr, want)
		}
	}
	if lrs[0] != cfg.Optimizer.LR/2 || lrs[1] != cfg.Optimizer.LR || lrs[len(lrs)-1] >= lrs[2] {
		t.Errorf("lr %v: want a warm-up to %v, then a decay", lrs, cfg.Optimizer.LR)
	}
}

// TestResumeContinuesSchedule: a run interrupted after 3 steps and resumed from its checkpoint
// continues the schedule at step 4, so its rates and final weights are the uninterrupted run's.
func TestResumeContinuesSchedule(t *testing.T) {
	src, _ := archive(t)
	run := func(out string, stopAfter int64, resume bool) *gpu.Weights {
		cfg := scheduled(src, out)
		trajs, _, err := Load(context.Background(), &cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		var be *cpu.Backend
		var start int64
		if resume {
			m := &checkpoint.Manager{Dir: out, Keep: 2}
			dir, st, ok, _, err := m.Latest()
			if err != nil || !ok || st.Step != stopAfter {
				t.Fatalf("checkpoint %s %+v %v: %v", dir, st, ok, err)
			}
			if be, err = cpu.Load(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := m.LoadOptimizer(dir, st, be); err != nil {
				t.Fatal(err)
			}
			start = st.Step
		} else if be, err = cpu.NewRandom(gpu.TinyConfig(), 3); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		log := quiet
		if stopAfter > 0 && !resume {
			log = slog.New(cancelAt{n: stopAfter, cancel: cancel})
		}
		_, err = Run(ctx, cfg, be, trajs, start, log)
		if stopAfter > 0 && !resume && err == nil {
			t.Fatal("the interrupted run did not stop")
		}
		if (stopAfter == 0 || resume) && err != nil {
			t.Fatal(err)
		}
		w, err := be.Weights()
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	a := filepath.Join(t.TempDir(), "a")
	full := run(a, 0, false)
	b := filepath.Join(t.TempDir(), "b")
	run(b, 3, false)
	if n := len(lrsOf(t, b)); n != 3 {
		t.Fatalf("the interrupted run took %d steps, want 3", n)
	}
	resumed := run(b, 3, true)
	want, got := lrsOf(t, a), lrsOf(t, b)
	if len(got) != len(want) {
		t.Fatalf("resumed run: %d steps, uninterrupted %d", len(got), len(want))
	}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("step %d: resumed lr %v, uninterrupted %v", k+1, got[k], want[k])
		}
	}
	for name, x := range full.Tensors {
		y := resumed.Tensors[name]
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				t.Fatalf("%s[%d]: uninterrupted %v, resumed %v", name, i, x[i], y[i])
			}
		}
	}
}

// TestScheduleRefusedBeforeTraining: a schedule the run's length cannot hold is refused before
// the first step, naming what to change, and an unknown schedule is a configuration error.
func TestScheduleRefusedBeforeTraining(t *testing.T) {
	src, _ := archive(t)
	out := filepath.Join(t.TempDir(), "sft")
	cfg := scheduled(src, out)
	cfg.MaxSteps = 4
	cfg.Optimizer.WarmupSteps = 4
	trajs, _, err := Load(context.Background(), &cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	be, err := cpu.NewRandom(gpu.TinyConfig(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), cfg, be, trajs, 0, quiet); err == nil || !strings.Contains(err.Error(), "warmup_steps 4 leaves none") {
		t.Fatalf("err %v", err)
	}
	if recs, _ := steplog.Read(out); len(recs) != 0 {
		t.Fatalf("%d steps taken before the refusal", len(recs))
	}
	cfg.Optimizer.LRSchedule = "exponential"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "lr_schedule") {
		t.Fatalf("err %v", err)
	}
}

// TestSeedChangesTheRun: the seed key orders each epoch's trajectories, so two runs with one seed
// train to the same weights, bit for bit (the pure-Go backend is deterministic), and a run with
// another seed to different ones.
func TestSeedChangesTheRun(t *testing.T) {
	src, _ := archive(t)
	run := func(seed uint64) *gpu.Weights {
		cfg := testConfig(src, filepath.Join(t.TempDir(), "sft"))
		cfg.Epochs, cfg.Seed = 1, seed
		trajs, _, err := Load(context.Background(), &cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		be, err := cpu.NewRandom(gpu.TinyConfig(), 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(context.Background(), cfg, be, trajs, 0, quiet); err != nil {
			t.Fatal(err)
		}
		w, err := be.Weights()
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	same := func(a, b *gpu.Weights) bool {
		for name, x := range a.Tensors {
			for i, v := range x {
				if math.Float32bits(v) != math.Float32bits(b.Tensors[name][i]) {
					return false
				}
			}
		}
		return true
	}
	one := run(1)
	if !same(one, run(1)) {
		t.Fatal("two runs with seed 1 differ")
	}
	if same(one, run(2)) {
		t.Fatal("runs with seeds 1 and 2 trained to the same weights")
	}
}
