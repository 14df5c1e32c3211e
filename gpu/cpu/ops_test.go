package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestEmbeddingGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	V, H := 5, 3
	tokens := []int32{2, 0, 2, 4} // token 2 repeats: its row must get both gradients
	wte := randVec(rng, V*H, 1)
	r := randVec(rng, len(tokens)*H, 1)
	out := make([]float64, len(tokens)*H)
	loss := func() float64 { embeddingForward(out, wte, tokens, H); return weightedSum(out, r) }
	loss()
	for i, tok := range tokens {
		for j := range H {
			if out[i*H+j] != wte[int(tok)*H+j] {
				t.Fatalf("row %d not copied from token %d", i, tok)
			}
		}
	}
	dw := make([]float64, V*H)
	embeddingBackward(dw, r, tokens, H)
	checkGrad(t, "dwte", wte, dw, loss)
}

func TestRMSNormGradient(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rows, C int
		eps     float64
	}{{"small", 3, 4, 1e-6}, {"wide", 2, 33, 1e-5}, {"many rows", 130, 8, 1e-6}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, uint64(tc.C)))
			x, w := randVec(rng, tc.rows*tc.C, 1), randVec(rng, tc.C, 1)
			r := randVec(rng, tc.rows*tc.C, 1)
			out, rstd := make([]float64, tc.rows*tc.C), make([]float64, tc.rows)
			loss := func() float64 { rmsnormForward(out, rstd, x, w, tc.rows, tc.C, tc.eps); return weightedSum(out, r) }
			loss()
			dx, dw := make([]float64, len(x)), make([]float64, len(w))
			rmsnormBackward(dx, dw, r, x, w, rstd, tc.rows, tc.C)
			allNonZero(t, "dx", dx)
			checkGrad(t, "dx", x, dx, loss)
			checkGrad(t, "dw", w, dw, loss)
		})
	}
}

func TestRMSNormValues(t *testing.T) {
	// x = (3, 4): mean(x²) = 12.5, rsqrt(12.5 + 0) · x · w.
	out, rstd := make([]float64, 2), make([]float64, 1)
	rmsnormForward(out, rstd, []float64{3, 4}, []float64{1, 2}, 1, 2, 0)
	s := 1 / math.Sqrt(12.5)
	assertClose(t, "out", out, []float64{3 * s, 8 * s}, 1e-15)
}

func TestQKNormGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	N, heads, hd := 3, 2, 4
	x, w := randVec(rng, N*heads*hd, 1), randVec(rng, hd, 1)
	r := randVec(rng, len(x), 1)
	out, rstd := make([]float64, len(x)), make([]float64, N*heads)
	loss := func() float64 { qkNormForward(out, rstd, x, w, N, heads, hd, 1e-6); return weightedSum(out, r) }
	loss()
	// Each head is normalized on its own: head 1 of node 0 depends only on its own 4 values.
	var ss float64
	for _, v := range x[hd : 2*hd] {
		ss += v * v
	}
	if got, want := out[hd], x[hd]/math.Sqrt(ss/float64(hd)+1e-6)*w[0]; math.Abs(got-want) > 1e-12 {
		t.Fatalf("per-head norm: got %v want %v", got, want)
	}
	dx, dw := make([]float64, len(x)), make([]float64, len(w))
	qkNormBackward(dx, dw, r, x, w, rstd, N, heads, hd)
	checkGrad(t, "dx", x, dx, loss)
	checkGrad(t, "dw", w, dw, loss)
}

func TestRoPEValues(t *testing.T) {
	// d = 4, θ = 10000: inv_freq = (1, 1/100). Rotate-half pairs (0,2) and (1,3).
	inv := ropeInvFreq(10000, 4)
	if inv[0] != 1 || math.Abs(float64(inv[1])-0.01) > 1e-9 {
		t.Fatalf("inv_freq = %v", inv)
	}
	for _, tc := range []struct {
		pos int32
		x   []float64
	}{{0, []float64{1, 2, 3, 4}}, {1, []float64{1, 0, 0, 0}}, {7, []float64{0.5, -1, 2, 0.25}}} {
		cos, sin := ropeTables[float64]([]int32{tc.pos}, inv)
		out := make([]float64, 4)
		ropeForward(out, tc.x, cos, sin, 1, 1, 4)
		var want [4]float64
		for i := range 2 {
			a := float64(float32(tc.pos) * inv[i])
			want[i] = tc.x[i]*math.Cos(a) - tc.x[i+2]*math.Sin(a)
			want[i+2] = tc.x[i+2]*math.Cos(a) + tc.x[i]*math.Sin(a)
		}
		assertClose(t, "rope", out, want[:], 1e-15)
	}
}

func TestRoPEInvFreqMatchesFP32(t *testing.T) {
	// transformers: 1/(θ ** (arange(0,d,2).float()/d)) in fp32. For θ = 1e6, d = 128 the last
	// frequency is 1e6^(-126/128); check the fp32 rounding chain lands within 1 ulp of it.
	inv := ropeInvFreq(1e6, 128)
	want := float32(math.Pow(1e6, -126.0/128))
	if d := math.Abs(float64(inv[63]-want)) / float64(want); d > 2e-7 {
		t.Fatalf("inv_freq[63] = %v, want ≈ %v", inv[63], want)
	}
}

func TestRoPEGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	N, heads, d := 3, 2, 6
	pos := []int32{0, 5, 3}
	cos, sin := ropeTables[float64](pos, ropeInvFreq(100, d))
	x, r := randVec(rng, N*heads*d, 1), randVec(rng, N*heads*d, 1)
	out := make([]float64, len(x))
	loss := func() float64 { ropeForward(out, x, cos, sin, N, heads, d); return weightedSum(out, r) }
	loss()
	dx := make([]float64, len(x))
	ropeBackward(dx, r, cos, sin, N, heads, d)
	checkGrad(t, "dx", x, dx, loss)
}

func TestMatmul(t *testing.T) {
	// [1 2; 3 4] · [[1 0],[1 1],[0 2]]ᵀ (W is [out=3, in=2])
	out := make([]float64, 6)
	matmulForward(out, []float64{1, 2, 3, 4}, []float64{1, 0, 1, 1, 0, 2}, 2, 2, 3)
	assertClose(t, "out", out, []float64{1, 3, 4, 3, 7, 8}, 0)
	for _, tc := range []struct{ N, I, O int }{{1, 1, 1}, {3, 5, 4}, {70, 6, 3}} {
		rng := rand.New(rand.NewPCG(5, uint64(tc.N)))
		x, w := randVec(rng, tc.N*tc.I, 1), randVec(rng, tc.O*tc.I, 1)
		r := randVec(rng, tc.N*tc.O, 1)
		out := make([]float64, tc.N*tc.O)
		loss := func() float64 { matmulForward(out, x, w, tc.N, tc.I, tc.O); return weightedSum(out, r) }
		dx, dw := make([]float64, len(x)), make([]float64, len(w))
		matmulBackward(dx, dw, r, x, w, tc.N, tc.I, tc.O)
		checkGrad(t, "dx", x, dx, loss)
		checkGrad(t, "dw", w, dw, loss)
	}
}

func TestSwiGLUGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	n := 17
	g, u, r := randVec(rng, n, 2), randVec(rng, n, 1), randVec(rng, n, 1)
	h := make([]float64, n)
	loss := func() float64 { swigluForward(h, g, u, n); return weightedSum(h, r) }
	loss()
	if want := g[0] / (1 + math.Exp(-g[0])) * u[0]; math.Abs(h[0]-want) > 1e-15 {
		t.Fatalf("silu(g)·u = %v, want %v", h[0], want)
	}
	dg, du := make([]float64, n), make([]float64, n)
	swigluBackward(dg, du, r, g, u, n)
	checkGrad(t, "dg", g, dg, loss)
	checkGrad(t, "du", u, du, loss)
}

func TestResidualGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	n := 5
	x, d, r := randVec(rng, n, 1), randVec(rng, n, 1), randVec(rng, n, 1)
	out := make([]float64, n)
	loss := func() float64 { residualForward(out, x, d, n); return weightedSum(out, r) }
	loss()
	assertClose(t, "x+d", out, []float64{x[0] + d[0], x[1] + d[1], x[2] + d[2], x[3] + d[3], x[4] + d[4]}, 0)
	dx, dd := make([]float64, n), make([]float64, n)
	residualBackward(dx, dd, r, n)
	checkGrad(t, "dx", x, dx, loss)
	checkGrad(t, "ddelta", d, dd, loss)
}
