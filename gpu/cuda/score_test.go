//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"tau2rl/gpu"
)

// TestPlanHead checks the head-row plan on a small hand-made tree: head rows are exactly the
// parents of scored nodes, in node order, and each lists its scored children.
func TestPlanHead(t *testing.T) {
	// 0 ─ 1 ─ 2 ─ 3
	//      └─ 4 ─ 5      and a second root 6 ─ 7
	mb := &gpu.MicroBatch{
		Tokens:     []int32{1, 2, 3, 4, 5, 6, 7, 8},
		Positions:  []int32{0, 1, 2, 3, 2, 3, 0, 1},
		Parent:     []int32{-1, 0, 1, 2, 1, 4, -1, 6},
		SubtreeEnd: []int32{5, 5, 3, 3, 5, 5, 7, 7},
	}
	for _, tc := range []struct {
		name                  string
		score                 []bool
		rowList, headRow, off []int32
		idx                   []int32
	}{
		{"no mask", nil,
			[]int32{0, 1, 2, 4, 6}, []int32{-1, 0, 1, 2, 1, 3, -1, 4}, []int32{0, 1, 3, 4, 5, 6}, []int32{1, 2, 4, 3, 5, 7}},
		{"completions only", []bool{false, false, false, true, true, true, false, false},
			[]int32{1, 2, 4}, []int32{-1, -1, -1, 1, 0, 2, -1, -1}, []int32{0, 1, 2, 3}, []int32{4, 3, 5}},
		{"a root marked scored", []bool{true, false, false, false, false, false, false, true},
			[]int32{6}, []int32{-1, -1, -1, -1, -1, -1, -1, 0}, []int32{0, 1}, []int32{7}},
		{"nothing scored", make([]bool, 8), nil, []int32{-1, -1, -1, -1, -1, -1, -1, -1}, []int32{0}, []int32{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := *mb
			m.Score = tc.score
			hp := planHead(&m)
			if !slices.Equal(hp.rowList, tc.rowList) || !slices.Equal(hp.headRow, tc.headRow) ||
				!slices.Equal(hp.childOff, tc.off) || !slices.Equal(hp.childIdx, tc.idx) {
				t.Errorf("plan rows %v headRow %v childOff %v childIdx %v, want %v %v %v %v",
					hp.rowList, hp.headRow, hp.childOff, hp.childIdx, tc.rowList, tc.headRow, tc.off, tc.idx)
			}
			for i, r := range hp.rowOf {
				if want := int32(slices.Index(tc.rowList, int32(i))); r != want {
					t.Errorf("rowOf[%d] = %d, want %d", i, r, want)
				}
			}
		})
	}
}

// TestScoreMask checks MicroBatch.Score on the GPU: a mask skips the LM head on unscored nodes and
// changes nothing on scored ones (the same log-probs and entropies, 0 elsewhere), Backward ignores
// dlogp on unscored nodes (the gradients equal those of an unmasked run whose unscored nodes carry
// no loss), and a mask scoring nothing leaves every gradient zero.
func TestScoreMask(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  gpu.Config
		opt  Options
	}{
		{"hd64_tied", smallConfig(), DefaultOptions()},
		{"hd128_untied_chunk37_recompute", wideConfig(), Options{Recompute: true, LogitChunk: 37, Attention: AttentionFA2}},
		// the fused head: tiles of 200, 200 and 112 of the 512-token vocabulary
		{"hd128_untied_chunk37_vocabtile200", wideConfig(), Options{LogitChunk: 37, VocabTile: 200, Attention: AttentionFA2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			w := testWeights(t, tc.cfg, 17)
			seqs := groupSequences(rng, tc.cfg.VocabSize, 2, 4, 80, 40)
			p := buildTree(seqs)
			n := p.mb.Len()
			// score the completions (every token past each group's prompt-like first 80) and leave
			// the rest unscored, as the trainer does; unscored nodes get garbage dlogp in the masked
			// run, zero in the full one
			masked := *p.mb
			masked.Score = make([]bool, n)
			for _, ns := range p.nodes {
				for tok, node := range ns {
					if tok >= 80 && tok%5 != 0 {
						masked.Score[node] = true
					}
				}
			}
			dl := p.dlogp(seqWeights(rng, seqs))
			dlFull, dlMasked := make([]float32, n), make([]float32, n)
			scored := 0
			for i := range n {
				dlMasked[i] = 1e3
				if masked.Score[i] && p.mb.Parent[i] >= 0 {
					dlFull[i], dlMasked[i] = dl[i], dl[i]
					scored++
				}
			}
			b := newBackend(t, w, tc.opt)
			full := cudaFB(t, b, p.mb, dlFull)
			if _, err := b.Step(gpu.Optimizer{LR: 0, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}); err != nil { // zero the gradients
				t.Fatal(err)
			}
			got := cudaFB(t, b, &masked, dlMasked)
			var worstLogp, worstEnt float64
			for i := range n {
				if !masked.Score[i] || p.mb.Parent[i] < 0 {
					if got.logp[i] != 0 || got.ent[i] != 0 {
						t.Fatalf("unscored node %d: logp %g entropy %g, want 0", i, got.logp[i], got.ent[i])
					}
					continue
				}
				worstLogp = math.Max(worstLogp, math.Abs(float64(got.logp[i]-full.logp[i])))
				worstEnt = math.Max(worstEnt, math.Abs(float64(got.ent[i]-full.ent[i])))
			}
			if worstLogp > 1e-3 || worstEnt > 1e-3 {
				t.Errorf("scored nodes: max |Δlogp| %.3g, |Δentropy| %.3g between masked and full runs, want ≤ 1e-3", worstLogp, worstEnt)
			}
			var worstGrad float64
			for _, name := range sortedKeys(full.grads) {
				e := relErr(got.grads[name], full.grads[name])
				worstGrad = math.Max(worstGrad, e)
				if e > tolExactRel*100 || math.IsNaN(e) {
					t.Errorf("gradient %s: masked vs full relative error %.3g, want ≤ %g", name, e, tolExactRel*100)
				}
			}
			lp, ent, err := b.LogProbs(&masked)
			if err != nil {
				t.Fatal(err)
			}
			if d := math.Max(maxAbs(lp, got.logp), maxAbs(ent, got.ent)); d > 1e-5 {
				t.Errorf("LogProbs with a mask differs from Forward by %.3g", d)
			}
			t.Logf("%d nodes, %d scored, %d head rows; max |Δlogp| %.3g, |Δentropy| %.3g, worst gradient rel. error %.3g",
				n, scored, len(planHead(&masked).rowList), worstLogp, worstEnt, worstGrad)

			if _, err := b.Step(gpu.Optimizer{LR: 0, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}); err != nil {
				t.Fatal(err)
			}
			none := *p.mb
			none.Score = make([]bool, n)
			zero := cudaFB(t, b, &none, dlMasked)
			if maxAbs(zero.logp, make([]float32, n)) != 0 || maxAbs(zero.ent, make([]float32, n)) != 0 {
				t.Error("a mask scoring nothing returned nonzero log-probs or entropies")
			}
			for _, name := range sortedKeys(zero.grads) {
				if d := maxAbs(zero.grads[name], make([]float32, len(zero.grads[name]))); d != 0 {
					t.Errorf("a mask scoring nothing: gradient %s has |g| up to %g, want 0", name, d)
				}
			}
		})
	}
}
