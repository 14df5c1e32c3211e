package step

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/cpu"
	"tau2rl/gpu/dp"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/feed"
)

// newGroupBackend is an n-rank in-process data-parallel group of cpu backends with newBackend's
// weights.
func newGroupBackend(t *testing.T, n int) gpu.Backend {
	t.Helper()
	w, err := gpu.NewRandomWeights(gpu.TinyConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	comms, err := collective.NewLocal(n)
	if err != nil {
		t.Fatal(err)
	}
	bes := make([]gpu.Backend, n)
	for r := range bes {
		if bes[r], err = cpu.New(w); err != nil {
			t.Fatal(err)
		}
	}
	g, err := dp.New(bes, comms)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// trainTwoSteps runs two steps of the same six groups on be and returns the last checkpoint.
func trainTwoSteps(t *testing.T, be gpu.Backend, minibatches int) (string, checkpoint.State) {
	t.Helper()
	return trainTwoStepsFed(t, be, minibatches, nil)
}

// trainTwoStepsFed is trainTwoSteps on the leader of several hosts when l is set.
func trainTwoStepsFed(t *testing.T, be gpu.Backend, minibatches int, l *feed.Leader) (string, checkpoint.State) {
	t.Helper()
	return trainTwoStepsWith(t, be, l, func(c *Config) { c.Actor.PPONMinibatches = minibatches })
}

// trainTwoStepsWith is trainTwoStepsFed with the configuration changed by edit.
func trainTwoStepsWith(t *testing.T, be gpu.Backend, l *feed.Leader, edit func(*Config)) (string, checkpoint.State) {
	t.Helper()
	cfg := testConfig(t)
	cfg.MaxSteps = 2
	cfg.BatchSize = 3
	cfg.Actor.MBSpec.MaxTokensPerMB = 40 // several micro-batches per step; every call still fits
	edit(&cfg)
	m, _ := NewMetrics(nil)
	tr, err := New(cfg, Deps{Backend: be, Metrics: m, Feed: l, Source: newMemSource(groupMessages(t, []string{"0", "1", "2", "3", "4", "5"}, 0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	if n := counterValue(t, m.OversizeCalls); n != 0 {
		t.Fatalf("%v calls dropped as longer than max_tokens_per_mb", n)
	}
	dir, st, ok, _, err := (&checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: 2}).Latest()
	if err != nil || !ok || st.Step != 2 {
		t.Fatalf("latest checkpoint: %+v %v %v", st, ok, err)
	}
	return dir, st
}

// TestDataParallelTrainerEqualsOneGPU: the trainer on a 3-rank data-parallel backend takes the
// steps it takes on one backend (loss, gradient norm, weights), and its checkpoint holds the
// sharded optimizer state, loadable by a group of another size.
func TestDataParallelTrainerEqualsOneGPU(t *testing.T) {
	for _, mbs := range []int{1, 2} {
		t.Run(fmt.Sprintf("ppo_n_minibatches=%d", mbs), func(t *testing.T) {
			oneDir, one := trainTwoSteps(t, newBackend(t), mbs)
			g := newGroupBackend(t, 3)
			defer g.Close()
			dpDir, par := trainTwoSteps(t, g, mbs)
			if par.Metrics["packed_tokens"] <= 2*40 {
				t.Fatalf("%v packed tokens fit two 40-token micro-batches: too little to spread over 3 ranks", par.Metrics["packed_tokens"])
			}
			for _, k := range []string{"loss", "grad_norm", "entropy", "clip_fraction"} {
				a, b := one.Metrics[k], par.Metrics[k]
				if math.Abs(a-b) > 1e-5*max(math.Abs(a), 1e-3) {
					t.Fatalf("%s: one GPU %v, 3 ranks %v", k, a, b)
				}
			}
			sameWeights(t, oneDir, dpDir, 2e-6)
			if par.Optimizer != checkpoint.OptimizerSaved {
				t.Fatalf("optimizer %q", par.Optimizer)
			}
			for r := range 3 {
				if _, err := os.Stat(filepath.Join(dpDir, dp.ShardFile(r, 3))); err != nil {
					t.Fatal(err)
				}
			}
			// A 2-rank group resumes from the 3-rank checkpoint through the checkpoint manager.
			w, _ := gpu.LoadWeights(dpDir)
			comms, _ := collective.NewLocal(2)
			bes := []gpu.Backend{must(cpu.New(w)), must(cpu.New(w))}
			g2, err := dp.New(bes, comms)
			if err != nil {
				t.Fatal(err)
			}
			defer g2.Close()
			if ok, err := (&checkpoint.Manager{Dir: filepath.Dir(dpDir)}).LoadOptimizer(dpDir, par, g2); err != nil || !ok {
				t.Fatalf("resume on 2 ranks: %v %v", ok, err)
			}
		})
	}
}

// sameWeights fails unless the checkpoints in dirs a and b hold the same weights within tol.
func sameWeights(t *testing.T, a, b string, tol float64) {
	t.Helper()
	wa, wb := must(gpu.LoadWeights(a)), must(gpu.LoadWeights(b))
	for name, x := range wa.Tensors {
		for i, v := range x {
			if d := math.Abs(float64(v - wb.Tensors[name][i])); d > tol {
				t.Fatalf("%s[%d]: %s %v, %s %v", name, i, a, v, b, wb.Tensors[name][i])
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
