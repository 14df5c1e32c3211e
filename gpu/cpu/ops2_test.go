package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// subtreeEnds derives SubtreeEnd from a pre-order parent array.
func subtreeEnds(parent []int32) []int32 {
	end := make([]int32, len(parent))
	for i := range end {
		end[i] = int32(i)
	}
	for i := len(parent) - 1; i >= 0; i-- {
		if p := parent[i]; p >= 0 {
			end[p] = max(end[p], end[i])
		}
	}
	return end
}

// testTree: 0 → 1 → {2, 3 → 4}; 5 is a second root → 6.
var testTreeParent = []int32{-1, 0, 1, 1, 3, -1, 5}

func TestAttentionGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	N, nh, nkv, d := len(testTreeParent), 4, 2, 4
	end := subtreeEnds(testTreeParent)
	q, k, v := randVec(rng, N*nh*d, 1), randVec(rng, N*nkv*d, 1), randVec(rng, N*nkv*d, 1)
	r := randVec(rng, N*nh*d, 1)
	out, lse := make([]float64, N*nh*d), make([]float64, N*nh)
	loss := func() float64 { attentionForward(out, lse, q, k, v, end, N, nh, nkv, d); return weightedSum(out, r) }
	loss()
	dq, dk, dv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
	attentionBackward(dq, dk, dv, r, q, k, v, out, lse, end, N, nh, nkv, d)
	allNonZero(t, "dk", dk)
	checkGrad(t, "dq", q, dq, loss)
	checkGrad(t, "dk", k, dk, loss)
	checkGrad(t, "dv", v, dv, loss)
}

func TestAttentionChainIsCausal(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	N, nh, nkv, d := 5, 2, 1, 3
	end := make([]int32, N)
	for i := range end {
		end[i] = int32(N - 1)
	}
	q, k, v := randVec(rng, N*nh*d, 1), randVec(rng, N*nkv*d, 1), randVec(rng, N*nkv*d, 1)
	out, lse := make([]float64, N*nh*d), make([]float64, N*nh)
	attentionForward(out, lse, q, k, v, end, N, nh, nkv, d)
	scale := 1 / math.Sqrt(float64(d))
	for i := range N {
		for h := range nh {
			// naive causal softmax over j ≤ i with the single kv head
			w := make([]float64, i+1)
			var sum float64
			for j := 0; j <= i; j++ {
				var s float64
				for x := range d {
					s += q[(i*nh+h)*d+x] * k[j*d+x]
				}
				w[j] = math.Exp(s * scale)
				sum += w[j]
			}
			for x := range d {
				var o float64
				for j := 0; j <= i; j++ {
					o += w[j] / sum * v[j*d+x]
				}
				if got := out[(i*nh+h)*d+x]; math.Abs(got-o) > 1e-12 {
					t.Fatalf("out[%d,%d,%d] = %v, naive causal %v", i, h, x, got, o)
				}
			}
		}
	}
}

func TestAttentionMaskIsolatesBranches(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	N, nh, nkv, d := len(testTreeParent), 2, 2, 4
	end := subtreeEnds(testTreeParent)
	q, k, v := randVec(rng, N*nh*d, 1), randVec(rng, N*nkv*d, 1), randVec(rng, N*nkv*d, 1)
	base, lse := make([]float64, N*nh*d), make([]float64, N*nh)
	attentionForward(base, lse, q, k, v, end, N, nh, nkv, d)
	// Change node 2's key and value: only node 2 itself may see it (3, 4 are a sibling branch,
	// 5, 6 another tree, 0, 1 ancestors).
	for x := range nkv * d {
		k[2*nkv*d+x] += 3
		v[2*nkv*d+x] -= 5
	}
	out := make([]float64, N*nh*d)
	attentionForward(out, lse, q, k, v, end, N, nh, nkv, d)
	for i := range N {
		changed := false
		for x := range nh * d {
			if out[i*nh*d+x] != base[i*nh*d+x] {
				changed = true
			}
		}
		if changed != (i == 2) {
			t.Errorf("node %d changed = %v after editing node 2's key/value", i, changed)
		}
	}
}

func TestPlanHead(t *testing.T) {
	hp := planHead(testTreeParent, nil)
	wantRows := []int32{0, 1, 3, 5}
	wantKids := [][]int32{{1}, {2, 3}, {4}, {6}}
	if len(hp.rows) != len(wantRows) {
		t.Fatalf("rows %v, want %v", hp.rows, wantRows)
	}
	for r := range wantRows {
		kids := hp.kids[hp.off[r]:hp.off[r+1]]
		if hp.rows[r] != wantRows[r] || len(kids) != len(wantKids[r]) {
			t.Fatalf("row %d: %d kids %v, want %d %v", r, hp.rows[r], kids, wantRows[r], wantKids[r])
		}
		for i := range kids {
			if kids[i] != wantKids[r][i] {
				t.Fatalf("row %d kids %v, want %v", r, kids, wantKids[r])
			}
		}
	}
}

func TestLogprobValuesAcrossChunks(t *testing.T) {
	// V > vocabChunk so the online softmax crosses a chunk boundary; compare with a direct
	// full-vocabulary log-softmax.
	rng := rand.New(rand.NewPCG(11, 11))
	N, H, V := len(testTreeParent), 3, vocabChunk+37
	f, w := randVec(rng, N*H, 1), randVec(rng, V*H, 1)
	w[(vocabChunk+5)*H] = 9 // a large logit in the second chunk moves the running max
	tokens := make([]int32, N)
	for i := range tokens {
		tokens[i] = int32(rng.IntN(V))
	}
	tokens[3] = vocabChunk + 5
	hp := planHead(testTreeParent, nil)
	logp, ent, lse := make([]float64, N), make([]float64, N), make([]float64, len(hp.rows))
	logprobForward(logp, ent, lse, f, w, tokens, hp, H, V)
	for c, p := range testTreeParent {
		if p < 0 {
			if logp[c] != 0 || ent[c] != 0 {
				t.Fatalf("root %d: logp %v entropy %v, want 0", c, logp[c], ent[c])
			}
			continue
		}
		z := make([]float64, V)
		m := math.Inf(-1)
		for v := range V {
			for x := range H {
				z[v] += f[int(p)*H+x] * w[v*H+x]
			}
			m = max(m, z[v])
		}
		var s float64
		for _, zv := range z {
			s += math.Exp(zv - m)
		}
		l := m + math.Log(s)
		var e float64
		for _, zv := range z {
			e -= math.Exp(zv-l) * (zv - l)
		}
		if math.Abs(logp[c]-(z[tokens[c]]-l)) > 1e-10 || math.Abs(ent[c]-e) > 1e-9 {
			t.Fatalf("node %d: logp %v entropy %v, want %v %v", c, logp[c], ent[c], z[tokens[c]]-l, e)
		}
	}
}

func TestLogprobGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	N, H, V := len(testTreeParent), 4, 11
	f, w := randVec(rng, N*H, 1), randVec(rng, V*H, 1)
	tokens := []int32{3, 1, 4, 1, 5, 9, 2}
	r := randVec(rng, N, 1)
	hp := planHead(testTreeParent, nil)
	logp, ent, lse := make([]float64, N), make([]float64, N), make([]float64, len(hp.rows))
	loss := func() float64 { logprobForward(logp, ent, lse, f, w, tokens, hp, H, V); return weightedSum(logp, r) }
	loss()
	df, dw := make([]float64, len(f)), make([]float64, len(w))
	logprobBackward(df, dw, r, lse, f, w, tokens, hp, H, V)
	allNonZero(t, "df", df)
	checkGrad(t, "df", f, df, loss)
	checkGrad(t, "dw", w, dw, loss)
	// Leaves (2, 4, 6) predict nothing: their rows get no gradient.
	for _, leaf := range []int{2, 4, 6} {
		for x := range H {
			if df[leaf*H+x] != 0 {
				t.Fatalf("leaf %d got gradient %v", leaf, df[leaf*H+x])
			}
		}
	}
}

func TestAdamWMatchesTorchFormula(t *testing.T) {
	// Three steps on two parameters, against the torch.optim.AdamW recurrence written out.
	lr, b1, b2, eps, wd := 0.1, 0.9, 0.999, 1e-8, 0.01
	p := []float64{1, -2}
	m, v := make([]float64, 2), make([]float64, 2)
	grads := [][]float64{{0.5, -1}, {0.25, 2}, {-1, 0}}
	ref := []float64{1, -2}
	rm, rv := []float64{0, 0}, []float64{0, 0}
	for step, g := range grads {
		gc := append([]float64(nil), g...)
		adamwUpdate(p, gc, m, v, 1, step+1, lr, b1, b2, eps, wd)
		for i := range ref {
			ref[i] *= 1 - lr*wd
			rm[i] = b1*rm[i] + (1-b1)*g[i]
			rv[i] = b2*rv[i] + (1-b2)*g[i]*g[i]
			bc1 := 1 - math.Pow(b1, float64(step+1))
			bc2 := 1 - math.Pow(b2, float64(step+1))
			ref[i] -= lr / bc1 * rm[i] / (math.Sqrt(rv[i])/math.Sqrt(bc2) + eps)
		}
	}
	assertClose(t, "params", p, ref, 1e-15)
	// First step of Adam moves each parameter by ≈ lr·sign(g) (plus decay): a sanity anchor.
	q := []float64{0}
	adamwUpdate(q, []float64{3}, []float64{0}, []float64{0}, 1, 1, 0.1, 0.9, 0.999, 1e-8, 0)
	if math.Abs(q[0]+0.1) > 1e-8 {
		t.Fatalf("first Adam step = %v, want −0.1", q[0])
	}
}

func TestClipping(t *testing.T) {
	g := []float64{3, 4}
	n := globalNorm(g)
	if n != 5 {
		t.Fatalf("norm %v, want 5", n)
	}
	for _, tc := range []struct{ norm, max, want float64 }{
		{5, 1, 1 / (5 + 1e-6)}, {0.5, 1, 1}, {5, 0, 1}, {5, -1, 1},
	} {
		if got := clipScale(tc.norm, tc.max); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("clipScale(%v, %v) = %v, want %v", tc.norm, tc.max, got, tc.want)
		}
	}
}
