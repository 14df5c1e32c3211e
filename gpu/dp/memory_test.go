package dp

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/cpu"
)

// TestMemoryModelFigures pins the model's arithmetic on the shapes of docs/MULTIGPU.md.
func TestMemoryModelFigures(t *testing.T) {
	gib := func(b int64) float64 { return float64(b) / (1 << 30) }
	for _, tc := range []struct {
		name    string
		cfg     gpu.Config
		backend string
		world   int
		level   Level
		bpp     float64 // bytes per parameter
		gib     float64 // per rank, ±0.05
	}{
		{"1.7B one GPU", gpu.Qwen3_1_7B(), "cuda", 1, Replicated, 18, 28.84},
		{"1.7B 2 GPUs optimizer", gpu.Qwen3_1_7B(), "cuda", 2, ShardOptimizer, 12, 19.23},
		{"8B one GPU", gpu.Qwen3_8B(), "cuda", 1, Replicated, 18, 137.31},
		{"8B 8 GPUs optimizer", gpu.Qwen3_8B(), "cuda", 8, ShardOptimizer, 7.5, 57.22},
		{"8B 8 GPUs parameters", gpu.Qwen3_8B(), "cuda", 8, ShardParameters, 3.16, 24.12},
		{"cpu 4 ranks", gpu.Qwen3_0_6B(), "cpu", 4, ShardOptimizer, 10, 5.59},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := MemoryModel(tc.cfg, tc.cfg.NumParams(), tc.backend, tc.world, tc.level)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(m.BytesPerParam()-tc.bpp) > 0.01 || math.Abs(gib(m.Bytes)-tc.gib) > 0.05 {
				t.Fatalf("%.3f B/param, %.2f GiB; want %.2f, %.2f", m.BytesPerParam(), gib(m.Bytes), tc.bpp, tc.gib)
			}
		})
	}
	if _, err := MemoryModel(gpu.TinyConfig(), 10, "tpu", 2, Replicated); err == nil {
		t.Fatal("unknown backend accepted")
	}
	var buf bytes.Buffer
	if err := WriteMemoryTable(&buf, "Qwen3-8B", gpu.Qwen3_8B(), "cuda", []int{1, 8}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"Qwen3-8B", "replicated", "optimizer", "parameters", "fp32 master weights 4÷8"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
	t.Logf("\n%s", out)
}

// TestMemoryModelMatchesCPUAllocations: what gpu/cpu ranks of a Group hold is what the model says.
func TestMemoryModelMatchesCPUAllocations(t *testing.T) {
	cfg := gpu.TinyConfig()
	w, _ := gpu.NewRandomWeights(cfg, 3)
	for _, world := range []int{1, 3, 4} {
		comms, _ := collective.NewLocal(world)
		bes := make([]gpu.Backend, world)
		for r := range bes {
			bes[r] = newCPU(t, w)
		}
		if world == 1 {
			m, _ := MemoryModel(cfg, cfg.NumParams(), "cpu", 1, Replicated)
			if got := bes[0].(*cpu.Backend).HeldBytes(); got != m.Bytes {
				t.Fatalf("unsharded: held %d, model %d", got, m.Bytes)
			}
		}
		g, err := New(bes, comms)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := MemoryModel(cfg, cfg.NumParams(), "cpu", world, ShardOptimizer)
		for r, be := range g.Backends() {
			if got := be.(*cpu.Backend).HeldBytes(); got != m.Bytes {
				t.Fatalf("world %d rank %d: held %d bytes, model %d", world, r, got, m.Bytes)
			}
		}
		g.Close()
	}
}
