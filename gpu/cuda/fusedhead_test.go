//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"tau2rl/gpu"
)

// TestFusedHeadMatchesChunked checks the vocabulary-tiled LM head (Options.VocabTile) against the
// default chunked one on the same weights and micro-batch: log-probs and entropies differ only by
// the fp32 order of the log-sum-exp sums, gradients only by the order of the fp32 input-gradient
// sum over tiles (and what bf16 rounding makes of it below the head); LogProbs equals Forward; and the device memory it holds is the chunked head's
// less the [chunk, V] logits plus the tile, the fp32 input gradient and the per-row state.
// The vocabulary (2501) is a multiple of neither 8 nor any tile, so every run has a narrower last
// tile on the kernels' scalar paths; the tile of 4096 is wider than the vocabulary (one tile);
// LogitChunk 37 and 100 split the head rows into chunks as well.
func TestFusedHeadMatchesChunked(t *testing.T) {
	const (
		tolFused = 1e-4 // max |Δ| of log-probs and entropies
		// Relative error per gradient tensor. The LM head's own weight gradient comes from the same
		// bf16 dlogits either way: 1e-3. Every other gradient flows from the head's input gradient,
		// rounded to bf16 once in both paths after fp32 sums in another order, so single-ulp flips
		// (2⁻⁸ relative) of some elements propagate through every layer below: measured on an H200,
		// up to 5.7e-3 (k_norm of layer 0), hence 1e-2 there.
		tolHeadGrad  = 1e-3
		tolFusedGrad = 1e-2
	)
	cfg := wideConfig() // untied: lm_head.weight has its own gradient
	cfg.VocabSize = 2501
	rng := rand.New(rand.NewPCG(11, 12))
	w := testWeights(t, cfg, 31)
	seqs := groupSequences(rng, cfg.VocabSize, 2, 3, 70, 30)
	p := buildTree(seqs)
	dl := p.dlogp(seqWeights(rng, seqs))
	n, R := p.mb.Len(), len(planHead(p.mb).rowList)
	if R <= 100 {
		t.Fatalf("only %d head rows: LogitChunk 37 and 100 would not split them", R)
	}
	chunked := newBackend(t, w, DefaultOptions())
	base := cudaFB(t, chunked, p.mb, dl)
	for _, tc := range []struct {
		name        string
		tile, chunk int
	}{
		{"tile1000", 1000, DefaultOptions().LogitChunk},
		{"tile256", 256, DefaultOptions().LogitChunk},
		{"tile4096_wider_than_vocab", 4096, DefaultOptions().LogitChunk},
		{"tile1000_chunk37", 1000, 37},
		{"tile256_chunk100", 256, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := DefaultOptions()
			opt.VocabTile, opt.LogitChunk = tc.tile, tc.chunk
			b := newBackend(t, w, opt)
			lp, ent, err := b.LogProbs(p.mb)
			if err != nil {
				t.Fatal(err)
			}
			got := cudaFB(t, b, p.mb, dl)
			if d := max(maxAbs(lp, got.logp), maxAbs(ent, got.ent)); d > 1e-5 {
				t.Errorf("LogProbs differs from Forward by %.3g", d)
			}
			if b.logitsKept {
				t.Error("the fused head kept logits for Backward")
			}
			dLogp, dEnt := maxAbs(got.logp, base.logp), maxAbs(got.ent, base.ent)
			if dLogp > tolFused || math.IsNaN(dLogp) {
				t.Errorf("log-probs: max |Δ| = %.3g vs the chunked head, want ≤ %g", dLogp, tolFused)
			}
			if dEnt > tolFused || math.IsNaN(dEnt) {
				t.Errorf("entropies: max |Δ| = %.3g vs the chunked head, want ≤ %g", dEnt, tolFused)
			}
			var worst float64
			for _, name := range sortedKeys(base.grads) {
				e := relErr(got.grads[name], base.grads[name])
				worst = max(worst, e)
				tol := tolFusedGrad
				if name == gpu.NameLMHead {
					tol = tolHeadGrad
				}
				if e > tol || math.IsNaN(e) {
					t.Errorf("gradient %s: relative difference %.3g vs the chunked head, want ≤ %g", name, e, tol)
				}
			}
			// Held memory: the same parameters and activations but for the head's buffers. The
			// chunked head holds bf16 logits [chunk, V]; the fused one a bf16 tile [chunk, min(tile,
			// V)], an fp32 input gradient [chunk, H] and an fp32 state [chunk, 3]; chunk is
			// LogitChunk capped at the node capacity (ensure).
			chunkDef := min(DefaultOptions().LogitChunk, alignUp(n, 64))
			chunk := min(tc.chunk, alignUp(n, 64))
			V, H := cfg.VocabSize, cfg.HiddenSize
			logits := int64(2 * chunkDef * V)
			fused := int64(2*chunk*min(tc.tile, V) + 4*chunk*H + 4*3*chunk)
			if d, want := chunked.HeldBytes()-b.HeldBytes(), logits-fused; d != want {
				t.Errorf("held bytes: chunked − fused = %d, want %d (logits %d, fused head buffers %d)", d, want, logits, fused)
			}
			if tc.tile < V/2 && b.HeldBytes() >= chunked.HeldBytes() {
				t.Errorf("fused head holds %d bytes, not less than the chunked head's %d", b.HeldBytes(), chunked.HeldBytes())
			}
			t.Logf("R %d head rows of %d nodes: max |Δlogp| %.3g, |Δent| %.3g, worst gradient %.3g; held %d vs %d bytes",
				R, n, dLogp, dEnt, worst, b.HeldBytes(), chunked.HeldBytes())
		})
	}
}
