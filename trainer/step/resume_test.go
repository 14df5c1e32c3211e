package step

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/trainer/checkpoint"
)

// TestResumeIsExact: a run of 2 steps, stopped and resumed from its checkpoint (as
// cmd/tau2-trainer does: weights, optimizer state, trainer state) for step 3, ends with the same
// weights, bit for bit, and the same optimizer state as an uninterrupted 3-step run. It holds for
// the default bfloat16 checkpoints too, because the optimizer state carries the fp32 masters.
// Without the optimizer state the resumed run diverges, so the comparison can fail.
func TestResumeIsExact(t *testing.T) {
	for _, dtype := range []gpu.DType{gpu.BF16, gpu.F32} {
		t.Run(string(dtype), func(t *testing.T) {
			msgs := groupMessages(t, []string{"0", "1", "2", "3", "4", "5"}, 0, 0) // 3 steps of B=2

			straight := testConfig(t)
			straight.MaxSteps = 3
			straight.Checkpoint.DType = string(dtype)
			beA := newBackend(t)
			trA, err := New(straight, Deps{Backend: beA, Source: newMemSource(msgs)})
			if err != nil {
				t.Fatal(err)
			}
			runTrainer(t, trA)

			stopped := testConfig(t)
			stopped.MaxSteps = 2
			stopped.Checkpoint.DType = string(dtype)
			trB, err := New(stopped, Deps{Backend: newBackend(t), Source: newMemSource(msgs)})
			if err != nil {
				t.Fatal(err)
			}
			runTrainer(t, trB)

			resume := func(withOptimizer bool) gpu.Backend {
				m := &checkpoint.Manager{Dir: stopped.Checkpoint.Dir, Keep: stopped.Checkpoint.Keep}
				dir, st, ok, _, err := m.Latest()
				if err != nil || !ok || st.Version != 2 || st.Optimizer != checkpoint.OptimizerSaved {
					t.Fatalf("checkpoint %s %+v %v %v", dir, st, ok, err)
				}
				be, err := cpu.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				if withOptimizer {
					if restored, err := m.LoadOptimizer(dir, st, be); err != nil || !restored {
						t.Fatalf("optimizer state restored %v: %v", restored, err)
					}
				}
				cfg := stopped
				cfg.MaxSteps = 3
				cfg.Checkpoint.Dir = t.TempDir()
				// Kafka redelivers from the committed offsets; the memory source replays
				// everything, and Restore skips what the checkpoint covers.
				tr, err := New(cfg, Deps{Backend: be, Source: newMemSource(msgs)})
				if err != nil {
					t.Fatal(err)
				}
				if err := tr.Restore(st); err != nil {
					t.Fatal(err)
				}
				runTrainer(t, tr)
				if tr.Step() != 3 {
					t.Fatalf("resumed run stopped at step %d", tr.Step())
				}
				if withOptimizer {
					// The optimizer state of the final checkpoints matches byte for byte
					// (moments, step count, master weights).
					a, errA := os.ReadFile(filepath.Join(straight.Checkpoint.Dir, "v3", gpu.OptimizerStateFile))
					b, errB := os.ReadFile(filepath.Join(cfg.Checkpoint.Dir, "v3", gpu.OptimizerStateFile))
					if errA != nil || errB != nil || !bytes.Equal(a, b) {
						t.Fatalf("v3 optimizer state differs (%v, %v)", errA, errB)
					}
				}
				return be
			}

			wantW := exportWeights(t, beA)
			if name, i := firstDiff(wantW, exportWeights(t, resume(true))); name != "" {
				t.Fatalf("resumed run's weights differ from the uninterrupted run's at %s[%d]", name, i)
			}
			if name, _ := firstDiff(wantW, exportWeights(t, resume(false))); name == "" {
				t.Fatal("a resume without optimizer state matched too: the test cannot tell")
			}
		})
	}
}

func exportWeights(t *testing.T, be gpu.Backend) *gpu.Weights {
	t.Helper()
	w, err := be.(gpu.WeightExporter).Weights()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// firstDiff returns the first tensor element whose bits differ ("" when none does).
func firstDiff(a, b *gpu.Weights) (string, int) {
	for _, s := range gpu.ParamSpecs(a.Config) {
		x, y := a.Tensors[s.Name], b.Tensors[s.Name]
		if len(x) != len(y) {
			return s.Name, -1
		}
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return s.Name, i
			}
		}
	}
	return "", 0
}
