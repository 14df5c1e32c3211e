package cpu

import "math"

// The language-model head fused with log-softmax, target gathering and entropy. For each node c
// with a parent p, the distribution over the vocabulary is softmax(z) with z = W·f[p] (W is
// lm_head.weight, or model.embed_tokens.weight when tied), and
//   logp[c] = z[tokens[c]] − lse(z),   entropy[c] = lse(z) − Σ_v softmax(z)_v·z_v.
// Roots have no predicting row: logp 0, entropy 0. Several children of one branching node share
// its row, which is computed once.
//
// The full logits are never materialized (151,936 per token for Qwen3): the forward pass walks
// the vocabulary in chunks of vocabChunk logits per row with an online (max, Σexp, Σexp·z)
// update, and saves only lse per row. The backward pass recomputes each logit:
//   dz_v = Σ_c dlogp[c]·([v = tokens[c]] − softmax(z)_v)
//   df[p] += Σ_v dz_v·W_v   (pass 1, parallel over rows)
//   dW_v  += Σ_p dz_v·f[p]  (pass 2, parallel over the vocabulary, so writes never collide).

// vocabChunk is how many logits of one row exist at a time in the forward pass.
const vocabChunk = 4096

// headPlan groups the scored nodes by the row that predicts them: rows[r] is a parent index and
// kids[off[r]:off[r+1]] are its children.
type headPlan struct {
	rows []int32
	off  []int32
	kids []int32
}

// planHead builds the headPlan of a parent array (rows in increasing order, kids in order). With a
// score mask, only scored children are planned, so rows that predict no scored node are skipped.
func planHead(parent []int32, score []bool) headPlan {
	scored := func(c int) bool { return score == nil || score[c] }
	count := make([]int32, len(parent))
	for c, p := range parent {
		if p >= 0 && scored(c) {
			count[p]++
		}
	}
	var hp headPlan
	slot := make([]int32, len(parent))
	for i, c := range count {
		if c > 0 {
			slot[i] = int32(len(hp.rows))
			hp.rows = append(hp.rows, int32(i))
		}
	}
	hp.off = make([]int32, len(hp.rows)+1)
	for r, p := range hp.rows {
		hp.off[r+1] = hp.off[r] + count[p]
	}
	hp.kids = make([]int32, hp.off[len(hp.rows)])
	fill := append([]int32(nil), hp.off[:len(hp.rows)]...)
	for c, p := range parent {
		if p >= 0 && scored(c) {
			r := slot[p]
			hp.kids[fill[r]] = int32(c)
			fill[r]++
		}
	}
	return hp
}

// logprobForward writes logp and entropy per node (0 for roots) and lse per plan row.
func logprobForward[T float](logp, entropy, lse, f, w []T, tokens []int32, hp headPlan, H, V int) {
	clear(logp)
	clear(entropy)
	parallelFor(len(hp.rows), grainFor(V*H), func(lo, hi int) {
		z := make([]float64, vocabChunk)
		for r := lo; r < hi; r++ {
			fr := f[int(hp.rows[r])*H : int(hp.rows[r]+1)*H]
			m, s, t := math.Inf(-1), 0.0, 0.0 // running max, Σexp(z−m), Σexp(z−m)·z
			for v0 := 0; v0 < V; v0 += vocabChunk {
				zc := z[:min(vocabChunk, V-v0)]
				cm := math.Inf(-1)
				for i := range zc {
					zc[i] = float64(dot(fr, w[(v0+i)*H:(v0+i+1)*H]))
					cm = max(cm, zc[i])
				}
				if cm > m {
					a := math.Exp(m - cm)
					s, t, m = s*a, t*a, cm
				}
				for _, zv := range zc {
					e := math.Exp(zv - m)
					s += e
					t += e * zv
				}
			}
			l := m + math.Log(s)
			lse[r] = T(l)
			for _, c := range hp.kids[hp.off[r]:hp.off[r+1]] {
				tok := int(tokens[c])
				zt := float64(dot(fr, w[tok*H:(tok+1)*H]))
				logp[c] = T(zt - l)
				entropy[c] = T(l - t/s)
			}
		}
	})
}

// logprobBackward accumulates df (rows of the predicting nodes) and dw from dlogp.
func logprobBackward[T float](df, dw, dlogp, lse, f, w []T, tokens []int32, hp headPlan, H, V int) {
	coef := make([]float64, len(hp.rows)) // Σ over a row's children of dlogp
	for r := range hp.rows {
		for _, c := range hp.kids[hp.off[r]:hp.off[r+1]] {
			coef[r] += float64(dlogp[c])
		}
	}
	// Pass 1: df[p] = Σ_v dz_v·W_v, one row per goroutine part.
	parallelFor(len(hp.rows), grainFor(V*H), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			p := int(hp.rows[r])
			fr, dfr := f[p*H:(p+1)*H], df[p*H:(p+1)*H]
			l := float64(lse[r])
			for v := range V {
				wv := w[v*H : (v+1)*H]
				prob := math.Exp(float64(dot(fr, wv)) - l)
				axpy(T(-coef[r]*prob), wv, dfr)
			}
			for _, c := range hp.kids[hp.off[r]:hp.off[r+1]] {
				tok := int(tokens[c])
				axpy(dlogp[c], w[tok*H:(tok+1)*H], dfr)
			}
		}
	})
	// Pass 2: dW_v = Σ_p dz_v·f[p], one vocabulary range per goroutine part.
	parallelFor(V, grainFor(len(hp.rows)*H), func(lo, hi int) {
		for r, p32 := range hp.rows {
			p := int(p32)
			fr := f[p*H : (p+1)*H]
			l := float64(lse[r])
			for v := lo; v < hi; v++ {
				wv := w[v*H : (v+1)*H]
				prob := math.Exp(float64(dot(fr, wv)) - l)
				axpy(T(-coef[r]*prob), fr, dw[v*H:(v+1)*H])
			}
			for _, c := range hp.kids[hp.off[r]:hp.off[r+1]] {
				if tok := int(tokens[c]); tok >= lo && tok < hi {
					axpy(dlogp[c], fr, dw[tok*H:(tok+1)*H])
				}
			}
		}
	})
}
