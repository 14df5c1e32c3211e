//go:build unix

package checkpoint

import (
	"os"
	"path/filepath"
	"testing"

	"tau2rl/gpu"
	"tau2rl/lib/cputime"
)

// Checkpoint benchmarks (docs/PERFORMANCE.md, "Checkpoint I/O"): a whole Manager.Save of a bf16
// model with its fp32 optimizer state (what tau2-trainer writes every checkpoint, through the
// writers the backends use: gpu.SaveCheckpoint and gpu.WriteOptimizerState), and the Verify that
// Latest, prune and a sampler's start run on each checkpoint. The default shape is Qwen3-0.6B's
// matrices with one layer and an 8192-token vocabulary (24 M parameters: 48 MB of weights,
// 288 MB of optimizer state); TAU2RL_CKPT_BENCH_MODEL=path/to/config.json runs a real shape
// (Qwen3-1.7B: 3.4 GB + 20.6 GB per checkpoint).

func benchConfig(b *testing.B) gpu.Config {
	b.Helper()
	if p := os.Getenv("TAU2RL_CKPT_BENCH_MODEL"); p != "" {
		c, err := gpu.LoadConfig(p)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	c := gpu.Qwen3_0_6B()
	c.NumHiddenLayers, c.VocabSize = 1, 8192
	return c
}

// benchWrite writes w as a backend's SaveBackend does: the bf16 model, then the optimizer state
// (the masters stand in for all three tensors; only their size matters here).
func benchWrite(w *gpu.Weights) func(dir string) error {
	return func(dir string) error {
		if err := w.Save(dir, gpu.BF16); err != nil {
			return err
		}
		return gpu.WriteOptimizerState(filepath.Join(dir, gpu.OptimizerStateFile), w.Config, 1,
			func(p gpu.ParamSpec, _ string) ([]float32, error) { return w.Tensors[p.Name], nil })
	}
}

// BenchmarkSaveWithOptimizer: bytes are the 2 + 3·4 bytes per parameter written.
func BenchmarkSaveWithOptimizer(b *testing.B) {
	w, err := gpu.NewPoolWeights(benchConfig(b), 1)
	if err != nil {
		b.Fatal(err)
	}
	m := &Manager{Dir: b.TempDir(), Keep: 1}
	b.SetBytes(14 * w.Config.NumParams())
	b.ResetTimer()
	c0 := cputime.Now()
	for i := range b.N {
		if _, err := m.Save(State{Version: int64(i + 1), Optimizer: OptimizerSaved}, benchWrite(w)); err != nil {
			b.Fatal(err)
		}
	}
	cputime.Report(b, c0, cputime.Milliseconds)
}

// BenchmarkVerify is one Verify of a checkpoint with optimizer state: headers and sizes only,
// so it costs the same at any model size.
func BenchmarkVerify(b *testing.B) {
	w, err := gpu.NewPoolWeights(benchConfig(b), 1)
	if err != nil {
		b.Fatal(err)
	}
	m := &Manager{Dir: b.TempDir(), Keep: 1}
	dir, err := m.Save(State{Version: 1, Optimizer: OptimizerSaved}, benchWrite(w))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	c0 := cputime.Now()
	for range b.N {
		if _, err := Verify(dir); err != nil {
			b.Fatal(err)
		}
	}
	cputime.Report(b, c0, cputime.Milliseconds)
}
