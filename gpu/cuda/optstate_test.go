//go:build cuda

package cuda

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
)

// stepper is what the resume tests drive: both backends train the same way.
type stepper interface {
	Forward(mb *gpu.MicroBatch) ([]float32, []float32, error)
	Backward(dlogp []float32) error
	Step(opt gpu.Optimizer) (float64, error)
}

// trainK runs one optimizer step whose gradient signal varies with k, with clipping active.
func trainK(t *testing.T, b stepper, p packed, k int) {
	t.Helper()
	if _, _, err := b.Forward(p.mb); err != nil {
		t.Fatal(err)
	}
	d := make([]float32, p.mb.Len())
	for i := range d {
		d[i] = float32((i*7+k*3)%5-2) / 2
	}
	if err := b.Backward(d); err != nil {
		t.Fatal(err)
	}
	opt := gpu.DefaultOptimizer()
	opt.LR, opt.MaxGradNorm = 1e-2, 0.5
	if _, err := b.Step(opt); err != nil {
		t.Fatal(err)
	}
}

func weightsOf(t *testing.T, b gpu.WeightExporter) *gpu.Weights {
	t.Helper()
	w, err := b.Weights()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// worstRel is the largest per-tensor relative difference between two weight sets.
func worstRel(a, b *gpu.Weights) float64 {
	var worst float64
	for _, s := range gpu.ParamSpecs(a.Config) {
		worst = math.Max(worst, relErr(a.Tensors[s.Name], b.Tensors[s.Name]))
	}
	return worst
}

func bitsEqual(a, b *gpu.Weights) bool {
	for _, s := range gpu.ParamSpecs(a.Config) {
		x, y := a.Tensors[s.Name], b.Tensors[s.Name]
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
	}
	return true
}

func readState(t *testing.T, dir string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, gpu.OptimizerStateFile))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestOptimizerStateResume: train two steps, save a bfloat16 checkpoint and the optimizer state,
// build a fresh backend from the checkpoint and load the state: the master weights, moments and
// step come back exactly (saving again gives the same bytes), and one more step matches the
// uninterrupted run up to the order of the gradient atomics, while the same resume without the
// optimizer state lands far off.
func TestOptimizerStateResume(t *testing.T) {
	cfg := wideConfig()
	rng := rand.New(rand.NewPCG(41, 42))
	w := testWeights(t, cfg, 43)
	p := buildTree(groupSequences(rng, cfg.VocabSize, 2, 3, 60, 30))
	a := newBackend(t, w, DefaultOptions())
	trainK(t, a, p, 0)
	trainK(t, a, p, 1)
	dir := t.TempDir()
	if err := a.Save(dir, gpu.BF16); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveOptimizerState(dir); err != nil {
		t.Fatal(err)
	}
	load := func(withState bool) *Backend {
		b, err := Load(dir, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		if withState {
			if err := b.LoadOptimizerState(dir); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	b, fresh := load(true), load(false)
	if !bitsEqual(weightsOf(t, a), weightsOf(t, b)) {
		t.Fatal("master weights after LoadOptimizerState differ from the saved backend's")
	}
	again := t.TempDir()
	if err := b.SaveOptimizerState(again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readState(t, dir), readState(t, again)) {
		t.Error("optimizer state saved after a load differs from the loaded file (moments or step not restored)")
	}
	trainK(t, a, p, 2)
	trainK(t, b, p, 2)
	trainK(t, fresh, p, 2)
	resumed, control := worstRel(weightsOf(t, a), weightsOf(t, b)), worstRel(weightsOf(t, a), weightsOf(t, fresh))
	if resumed > 1e-5 {
		t.Errorf("resumed step vs uninterrupted: worst relative difference %.3g, want ≤ 1e-5", resumed)
	}
	if control < 100*resumed || control < 1e-4 {
		t.Errorf("resume without optimizer state differs by only %.3g (resumed %.3g): the test cannot tell", control, resumed)
	}
	t.Logf("after the resumed step: worst relative difference %.2g with the state, %.2g without", resumed, control)
}

// TestOptimizerStateAcrossBackends: a state saved by gpu/cpu loads into the CUDA backend with the
// same weights and step, and the CUDA backend's file loads into gpu/cpu.
func TestOptimizerStateAcrossBackends(t *testing.T) {
	cfg := smallConfig()
	rng := rand.New(rand.NewPCG(51, 52))
	w := testWeights(t, cfg, 53)
	p := buildTree(groupSequences(rng, cfg.VocabSize, 1, 3, 40, 20))
	ref, err := cpu.New(w)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	trainK(t, ref, p, 0)
	cpuDir := t.TempDir()
	if err := ref.SaveOptimizerState(cpuDir); err != nil {
		t.Fatal(err)
	}
	g := newBackend(t, w, DefaultOptions())
	if err := g.LoadOptimizerState(cpuDir); err != nil {
		t.Fatal(err)
	}
	if !bitsEqual(weightsOf(t, ref), weightsOf(t, g)) {
		t.Error("CUDA master weights after loading gpu/cpu's state differ from gpu/cpu's")
	}
	cudaDir := t.TempDir()
	if err := g.SaveOptimizerState(cudaDir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readState(t, cpuDir), readState(t, cudaDir)) {
		t.Error("the CUDA backend does not write back the gpu/cpu file it loaded byte for byte")
	}
	ref2, err := cpu.New(w)
	if err != nil {
		t.Fatal(err)
	}
	defer ref2.Close()
	if err := ref2.LoadOptimizerState(cudaDir); err != nil {
		t.Fatalf("gpu/cpu loading the CUDA backend's state: %v", err)
	}
}

// TestOptimizerStateErrors: a missing, truncated, foreign-config or tampered file is an error that
// leaves the backend's state unchanged.
func TestOptimizerStateErrors(t *testing.T) {
	cfg := wideConfig()
	rng := rand.New(rand.NewPCG(61, 62))
	p := buildTree(groupSequences(rng, cfg.VocabSize, 1, 2, 30, 20))
	b := newBackend(t, testWeights(t, cfg, 63), DefaultOptions())
	trainK(t, b, p, 0)
	good := t.TempDir()
	if err := b.SaveOptimizerState(good); err != nil {
		t.Fatal(err)
	}
	before := readState(t, good)
	other := newBackend(t, testWeights(t, smallConfig(), 64), DefaultOptions())
	foreign := t.TempDir()
	if err := other.SaveOptimizerState(foreign); err != nil {
		t.Fatal(err)
	}
	truncated := t.TempDir()
	if err := os.WriteFile(filepath.Join(truncated, gpu.OptimizerStateFile), before[:len(before)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	// a negative second moment: the last value of the file set to -1.0 (tensors are written per
	// parameter as master, exp_avg, exp_avg_sq, so the file ends with an exp_avg_sq)
	negative := t.TempDir()
	tampered := append([]byte(nil), before...)
	copy(tampered[len(tampered)-4:], []byte{0x00, 0x00, 0x80, 0xbf})
	if err := os.WriteFile(filepath.Join(negative, gpu.OptimizerStateFile), tampered, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"missing", t.TempDir(), "no such file"},
		{"truncated", truncated, ""},
		{"foreign config", foreign, "has shape"},
		{"negative second moment", negative, "second moment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.LoadOptimizerState(tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
			after := t.TempDir()
			if err := b.SaveOptimizerState(after); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, readState(t, after)) {
				t.Error("a failed load changed the backend's state")
			}
		})
	}
}
