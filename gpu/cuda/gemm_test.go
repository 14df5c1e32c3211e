//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"tau2rl/gpu"
)

// TestTunedGEMMsMatchCublas: Options.GEMM "tuned" (cuBLASLt, csrc/gemm.cu) computes what
// "cublas" does, up to summation order. Two micro-batches of 300 and 310 tokens share their
// shape buckets, so the second reuses the first's tuned algorithms on another exact shape (the
// cublasLtMatmulAlgoCheck path); their weight gradients accumulate, so a tuning trial that added
// into the real gradient instead of its scratch buffer would show as a gradient several times too
// large. The plan report must list the shapes it tuned.
func TestTunedGEMMsMatchCublas(t *testing.T) {
	cfg := wideConfig()
	w := testWeights(t, cfg, 41)
	rng := rand.New(rand.NewPCG(43, 44))
	mbs := []*gpu.MicroBatch{chains(rng, cfg.VocabSize, 2, 150), chains(rng, cfg.VocabSize, 2, 155)}
	run := func(mode string) ([][]float32, map[string][]float32, string) {
		opt := DefaultOptions()
		opt.GEMM = mode
		b := newBackend(t, w, opt)
		var logps [][]float32
		for _, mb := range mbs {
			lp, _, err := b.Forward(mb)
			if err != nil {
				t.Fatalf("%s: Forward: %v", mode, err)
			}
			dl := make([]float32, len(lp))
			for i := range dl {
				dl[i] = 0.01 * float32(i%11-5)
			}
			if err := b.Backward(dl); err != nil {
				t.Fatalf("%s: Backward: %v", mode, err)
			}
			logps = append(logps, lp)
		}
		g, err := b.Gradients()
		if err != nil {
			t.Fatalf("%s: Gradients: %v", mode, err)
		}
		rep, err := b.GEMMPlans()
		if err != nil {
			t.Fatalf("%s: GEMMPlans: %v", mode, err)
		}
		return logps, g, rep
	}
	refLogp, refGrads, refRep := run(GEMMCublas)
	logp, grads, rep := run(GEMMTuned)
	if refRep != "" {
		t.Errorf("cublas: plan report %q, want none", refRep)
	}
	for i := range refLogp {
		if d := maxAbs(logp[i], refLogp[i]); d > 0.05 || math.IsNaN(d) {
			t.Errorf("micro-batch %d: log-probs tuned vs cublas max |Δ| %.3g, want ≤ 0.05", i, d)
		}
	}
	for _, name := range sortedKeys(refGrads) {
		if e := relErr(grads[name], refGrads[name]); e > tolGradRel/4 || math.IsNaN(e) {
			t.Errorf("gradient %s: tuned vs cublas relative difference %.3g, want ≤ %g", name, e, tolGradRel/4)
		}
	}
	t.Logf("tuned plans:\n%s", rep)
	// Three GEMMs per projection (forward, input and weight gradient) of the 300-token batch,
	// the 310-token one reusing them: at least qkv, o, gate/up, down and the LM head's.
	if n := strings.Count(rep, "calls; picked"); n < 10 {
		t.Errorf("plan report lists %d tuned shapes, want ≥ 10:\n%s", n, rep)
	}
}
