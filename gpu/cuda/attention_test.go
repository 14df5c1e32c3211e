//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/safetensors"
)

// randBF16 returns count bf16 bit patterns of N(0, std²) values.
func randBF16(rng *rand.Rand, count int, std float64) []uint16 {
	out := make([]uint16, count)
	for i := range out {
		out[i] = safetensors.BF16FromFloat32(float32(std * rng.NormFloat64()))
	}
	return out
}

func bf16s(x []uint16) []float64 {
	out := make([]float64, len(x))
	for i, h := range x {
		out[i] = float64(safetensors.Float32FromBF16(h))
	}
	return out
}

// newAttnProblem draws random q, k, v, dout for the micro-batch's mask (q scaled by 2 so the
// softmax is peaked enough for masking errors to show).
func newAttnProblem(rng *rand.Rand, mb *gpu.MicroBatch, nh, nkv, d int) *attnInputs {
	n := mb.Len()
	return &attnInputs{
		n: n, nh: nh, nkv: nkv, d: d,
		q: randBF16(rng, n*nh*d, 2), k: randBF16(rng, n*nkv*d, 1), v: randBF16(rng, n*nkv*d, 1),
		dout: randBF16(rng, n*nh*d, 1), subtreeEnd: mb.SubtreeEnd,
	}
}

// attnRef is tree attention forward and backward in float64 from the same bf16 inputs: for each
// query i and head h, softmax over the visible keys j (j ≤ i ≤ subtree_end[j]) of q·k/√d.
type attnRef struct {
	out, dq, dk, dv, lse []float64
}

func referenceAttention(in *attnInputs) attnRef {
	n, nh, nkv, d := in.n, in.nh, in.nkv, in.d
	q, k, v, dout := bf16s(in.q), bf16s(in.k), bf16s(in.v), bf16s(in.dout)
	qd, kd := nh*d, nkv*d
	r := attnRef{out: make([]float64, n*qd), dq: make([]float64, n*qd), dk: make([]float64, n*kd),
		dv: make([]float64, n*kd), lse: make([]float64, n*nh)}
	scale := 1 / math.Sqrt(float64(d))
	var vis []int
	var s, p []float64
	for i := range n {
		vis = vis[:0]
		for j := 0; j <= i; j++ {
			if i <= int(in.subtreeEnd[j]) {
				vis = append(vis, j)
			}
		}
		for h := range nh {
			g := h / (nh / nkv)
			qi, doi := q[i*qd+h*d:][:d], dout[i*qd+h*d:][:d]
			s, p = s[:0], p[:0]
			mx := math.Inf(-1)
			for _, j := range vis {
				kj := k[j*kd+g*d:][:d]
				var dot float64
				for c := range d {
					dot += qi[c] * kj[c]
				}
				s = append(s, dot*scale)
				mx = math.Max(mx, dot*scale)
			}
			var sum float64
			for _, x := range s {
				e := math.Exp(x - mx)
				p = append(p, e)
				sum += e
			}
			r.lse[h*n+i] = (mx + math.Log(sum)) / math.Ln2
			oi := r.out[i*qd+h*d:][:d]
			for a, j := range vis {
				p[a] /= sum
				vj := v[j*kd+g*d:][:d]
				for c := range d {
					oi[c] += p[a] * vj[c]
				}
			}
			var di float64
			for c := range d {
				di += doi[c] * oi[c]
			}
			dqi := r.dq[i*qd+h*d:][:d]
			for a, j := range vis {
				vj, kj := v[j*kd+g*d:][:d], k[j*kd+g*d:][:d]
				var dp float64
				for c := range d {
					dp += doi[c] * vj[c]
				}
				ds := p[a] * (dp - di) * scale
				dkj, dvj := r.dk[j*kd+g*d:][:d], r.dv[j*kd+g*d:][:d]
				for c := range d {
					dqi[c] += ds * kj[c]
					dkj[c] += ds * qi[c]
					dvj[c] += p[a] * doi[c]
				}
			}
		}
	}
	return r
}

// relErrBF16 is ‖got − ref‖ / ‖ref‖ (NaN when got holds a NaN, e.g. an unwritten element).
func relErrBF16(got []uint16, ref []float64) float64 {
	var num, den float64
	for i, h := range got {
		x := float64(safetensors.Float32FromBF16(h))
		num += (x - ref[i]) * (x - ref[i])
		den += ref[i] * ref[i]
	}
	return math.Sqrt(num / den)
}

// attentionImpls lists the kernel sets a device runs, for the tests and benchmarks that compare
// them: the FA2 pair and WMMA everywhere, the wgmma ones where info.Hopper.
func attentionImpls(info DeviceInfo) []string {
	impls := []string{AttentionFA2, AttentionFA2Det, AttentionWMMA}
	if info.Hopper {
		impls = append(impls, AttentionHopper)
	}
	return impls
}

// TestAttentionKernels checks both attention kernel sets against a float64 reference on tree and
// chain masks whose sizes are not multiples of the tiles, with GQA, for head_dim 64 and 128, and
// the FA2 kernels against the WMMA ones. bf16 inputs and bf16 P/dS operands put the expected
// relative error near 3e-3; a masking or indexing error is O(1).
func TestAttentionKernels(t *testing.T) {
	const tol = 1.5e-2
	info, err := Device(0)
	if err != nil {
		t.Skip(err)
	}
	impls := attentionImpls(info)
	if !info.Hopper {
		t.Logf("%s: no wgmma kernels here, the hopper kernels are not checked", info.Name)
	}
	rng := rand.New(rand.NewPCG(21, 22))
	tree := buildTree(groupSequences(rng, 50, 2, 5, 150, 40)).mb
	chainsMB := unpack([][]int32{make([]int32, 300), make([]int32, 131), make([]int32, 517), make([]int32, 1)}).mb
	long := unpack([][]int32{make([]int32, 1000), make([]int32, 333)}).mb
	for _, tc := range []struct {
		name        string
		mb          *gpu.MicroBatch
		nh, nkv, hd int
	}{
		{"tree/hd64/gqa2", tree, 4, 2, 64},
		{"tree/hd128/gqa2", tree, 4, 2, 128},
		{"chains/hd128/gqa4", chainsMB, 4, 1, 128},
		{"chains/hd64/mha", chainsMB, 2, 2, 64},
		{"long/hd128/gqa2", long, 2, 1, 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := newAttnProblem(rng, tc.mb, tc.nh, tc.nkv, tc.hd)
			ref := referenceAttention(in)
			got := map[string]*attnOutputs{}
			for _, impl := range impls {
				res, err := runAttention(in, impl, 0)
				if err != nil {
					t.Fatalf("%s: %v", impl, err)
				}
				got[impl] = res
				for _, c := range []struct {
					what string
					got  []uint16
					ref  []float64
				}{{"out", res.out, ref.out}, {"dq", res.dq, ref.dq}, {"dk", res.dk, ref.dk}, {"dv", res.dv, ref.dv}} {
					if e := relErrBF16(c.got, c.ref); !(e <= tol) {
						t.Errorf("%s %s: relative error %.3g vs float64, want ≤ %g", impl, c.what, e, tol)
					}
				}
				var worst float64
				for i, x := range res.lse {
					worst = math.Max(worst, math.Abs(float64(x)-ref.lse[i]))
					if math.IsNaN(float64(x)) {
						worst = math.Inf(1)
					}
				}
				if worst > 4e-3 {
					t.Errorf("%s lse: max |Δ| %.3g vs float64, want ≤ 4e-3", impl, worst)
				}
			}
			a, b, det := got[AttentionFA2], got[AttentionWMMA], got[AttentionFA2Det]
			for _, c := range []struct {
				what string
				x, y []uint16
			}{{"out", a.out, b.out}, {"dq", a.dq, b.dq}, {"dk", a.dk, b.dk}, {"dv", a.dv, b.dv}} {
				if e := relErrBF16(c.x, bf16s(c.y)); !(e <= tol) {
					t.Errorf("fa2 vs wmma %s: relative difference %.3g, want ≤ %g", c.what, e, tol)
				}
			}
			// The two FA2 variants share the forward and the dK/dV arithmetic bit for bit; their dQ
			// differs only in fp32 summation order before the one rounding to bf16.
			for _, c := range []struct {
				what string
				x, y []uint16
			}{{"out", a.out, det.out}, {"dk", a.dk, det.dk}, {"dv", a.dv, det.dv}} {
				if !slices.Equal(c.x, c.y) {
					t.Errorf("fa2 vs fa2-deterministic %s: not the same bits", c.what)
				}
			}
			if e := relErrBF16(a.dq, bf16s(det.dq)); !(e <= 4e-3) {
				t.Errorf("fa2 (atomic dQ) vs fa2-deterministic dq: relative difference %.3g, want ≤ 4e-3", e)
			}
			if hop := got[AttentionHopper]; hop != nil {
				// The same function on other tensor-core instructions and summation orders (out
				// within 8e-4 of FA2's on the H200 and H100), and a deterministic forward.
				for _, c := range []struct {
					what string
					x, y []uint16
				}{{"out", hop.out, a.out}, {"dq", hop.dq, a.dq}, {"dk", hop.dk, a.dk}, {"dv", hop.dv, a.dv}} {
					if e := relErrBF16(c.x, bf16s(c.y)); !(e <= 4e-3) {
						t.Errorf("hopper vs fa2 %s: relative difference %.3g, want ≤ 4e-3", c.what, e)
					}
				}
				worst := maxAbs(hop.lse, a.lse) // NaN where the kernel left an lse unwritten
				if !(worst <= 1e-3) {
					t.Errorf("hopper vs fa2 lse: max |Δ| %.3g, want ≤ 1e-3", worst)
				}
				again, err := runAttention(in, AttentionHopper, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(again.out, hop.out) || !slices.Equal(again.lse, hop.lse) {
					t.Error("hopper: a second run gave other out/lse bits")
				}
				t.Logf("hopper out %.2e dq %.2e dk %.2e dv %.2e vs float64; vs fa2 out %.2e dq %.2e dk %.2e dv %.2e, lse max |Δ| %.2e",
					relErrBF16(hop.out, ref.out), relErrBF16(hop.dq, ref.dq), relErrBF16(hop.dk, ref.dk),
					relErrBF16(hop.dv, ref.dv), relErrBF16(hop.out, bf16s(a.out)), relErrBF16(hop.dq, bf16s(a.dq)),
					relErrBF16(hop.dk, bf16s(a.dk)), relErrBF16(hop.dv, bf16s(a.dv)), worst)
			}
			again, err := runAttention(in, AttentionFA2Det, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(again.dq, det.dq) || !slices.Equal(again.dk, det.dk) {
				t.Error("fa2-deterministic: a second run gave other dq/dk bits")
			}
			t.Logf("n %d: fa2 out %.2e dq %.2e dk %.2e dv %.2e; wmma out %.2e dq %.2e", tc.mb.Len(),
				relErrBF16(a.out, ref.out), relErrBF16(a.dq, ref.dq), relErrBF16(a.dk, ref.dk), relErrBF16(a.dv, ref.dv),
				relErrBF16(b.out, ref.out), relErrBF16(b.dq, ref.dq))
		})
	}
}

// TestAttentionImplsAgreeInModel: the whole model's log-probs and gradients with the FA2 kernels
// (atomic and deterministic dQ) equal those with the WMMA kernels up to bf16 rounding, and an
// unknown kernel name is refused.
func TestAttentionImplsAgreeInModel(t *testing.T) {
	cfg := wideConfig()
	rng := rand.New(rand.NewPCG(31, 32))
	w := testWeights(t, cfg, 37)
	seqs := groupSequences(rng, cfg.VocabSize, 2, 4, 90, 45)
	p := buildTree(seqs)
	dl := p.dlogp(seqWeights(rng, seqs))
	opt := DefaultOptions()
	opt.Attention = AttentionFA2
	fa := cudaFB(t, newBackend(t, w, opt), p.mb, dl)
	opt.Attention = AttentionWMMA
	wm := cudaFB(t, newBackend(t, w, opt), p.mb, dl)
	if d := maxAbs(fa.logp, wm.logp); d > 0.05 {
		t.Errorf("log-probs: fa2 vs wmma max |Δ| %.3g, want ≤ 0.05", d)
	}
	for _, name := range sortedKeys(wm.grads) {
		if e := relErr(fa.grads[name], wm.grads[name]); e > tolGradRel/2 || math.IsNaN(e) {
			t.Errorf("gradient %s: fa2 vs wmma relative difference %.3g, want ≤ %g", name, e, tolGradRel/2)
		}
	}
	others := []string{AttentionFA2Det}
	if info, err := Device(0); err == nil && info.Hopper {
		others = append(others, AttentionHopper)
	}
	for _, impl := range others {
		opt.Attention = impl
		got := cudaFB(t, newBackend(t, w, opt), p.mb, dl)
		if impl == AttentionHopper { // (fa2-deterministic shares fa2's forward, checked above)
			if d := maxAbs(got.logp, wm.logp); d > 0.05 {
				t.Errorf("log-probs: %s vs wmma max |Δ| %.3g, want ≤ 0.05", impl, d)
			}
		}
		for _, name := range sortedKeys(wm.grads) {
			if e := relErr(got.grads[name], wm.grads[name]); e > tolGradRel/2 || math.IsNaN(e) {
				t.Errorf("gradient %s: %s vs wmma relative difference %.3g, want ≤ %g", name, impl, e, tolGradRel/2)
			}
		}
	}
	opt.Attention = "flash3"
	if _, err := New(w, opt); err == nil {
		t.Error(`attention "flash3": no error`)
	}
}
