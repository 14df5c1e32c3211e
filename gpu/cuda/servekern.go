//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"tau2rl/gpu"
)

// The serving kernels on their own, on host data, for their checks against CPU references
// (decoder_test.go): the Decoder calls them from decoder.go on its own buffers.

// servAttnProblem is one layer's serving attention: a KV cache of kv's geometry ([slots, nkv·d]
// bf16 bits for K and V), the step's sequences (their Tokens only give the chunk lengths), and the
// new tokens' q [n, nh·d], k and v [n, nkv·d].
type servAttnProblem struct {
	cfg            gpu.Config // heads and head_dim
	kv             gpu.KVCacheSpec
	seqs           []gpu.ServeSeq
	cacheK, cacheV []uint16
	q, k, v        []uint16
	noMMA          bool // plan with the CUDA-core kernel only
	ownMMA         bool // decode tokens' own blocks on the tensor-core kernel too
}

// runServeAttention writes the new keys and values into a copy of the cache (t2_kv_write), runs
// the FA2 kernel over the step's tokens, the paged kernel over the cached context and the merge,
// (or, for a step of decode tokens only, the paged kernel alone) exactly as a Decoder layer does, and returns the attention output [n, nh·d] and the cache after
// the write. Outputs are poisoned (NaN) before the run.
func runServeAttention(pr *servAttnProblem) (att, cacheK, cacheV []uint16, err error) {
	c := pr.cfg
	d := &Decoder{cfg: c, kv: pr.kv, sms: 132}
	d.noMMA, d.ownMMA = pr.noMMA, pr.ownMMA
	p := d.plan(pr.seqs)
	n, nitems, nm := p.n, len(p.items)/8, len(p.mitems)/8
	ints := p.itemInts()
	QD, KVD := c.QDim(), c.KVDim()
	if len(pr.q) != n*QD || len(pr.k) != n*KVD || len(pr.v) != n*KVD || len(pr.cacheK) != pr.kv.Tokens()*KVD {
		return nil, nil, nil, fmt.Errorf("cuda: serve attention problem: tensor sizes")
	}
	var g group
	defer g.free()
	bufK, bufV := g.get(2*len(pr.cacheK)), g.get(2*len(pr.cacheV))
	dq, dk, dv, datt := g.get(2*n*QD), g.get(2*n*KVD), g.get(2*n*KVD), g.get(2*n*QD)
	lse, send, bmax, slots, info := g.get(4*n*c.NumAttentionHeads), g.get(4*n), g.get(blockmaxBytes(n)), g.get(4*n), g.get(12*n)
	items, tables := g.get(4*len(ints)), g.get(4*len(p.tables))
	partO, partLse := g.get(4*p.nslots*C.T2_PAGED_ROWS*c.HeadDim), g.get(4*p.nslots*C.T2_PAGED_ROWS)
	if g.err != nil {
		return nil, nil, nil, g.err
	}
	for _, u := range []struct {
		dst dptr
		src []uint16
	}{{bufK, pr.cacheK}, {bufV, pr.cacheV}, {dq, pr.q}, {dk, pr.k}, {dv, pr.v}} {
		if err := h2d(u.dst, u.src); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, u := range []struct {
		dst dptr
		src []int32
	}{{send, p.send}, {slots, p.slots}, {info, p.tokInfo}, {items, ints}, {tables, p.tables}} {
		if err := h2d(u.dst, u.src); err != nil {
			return nil, nil, nil, err
		}
	}
	nh, nkv, hd := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim
	s := &seq{}
	s.do("poison", func() C.t2_status { return C.t2_memset(datt, 0xff, csz(2*n*QD)) })
	s.do("blockmax", func() C.t2_status { return C.t2_tree_blockmax(i32p(bmax), i32p(send), ci(n)) })
	s.do("kv write", func() C.t2_status {
		return C.t2_kv_write(bufK, bufV, dk, dv, ci(KVD), ci(KVD), i32p(slots), ci(n), ci(KVD))
	})
	hasBase := C.int(1)
	if p.pure {
		hasBase = 0
	} else {
		s.do("fa2", func() C.t2_status {
			return C.t2_attention_fwd(datt, f32p(lse), dq, dk, dv, ci(QD), ci(KVD), ci(KVD), i32p(send), i32p(bmax),
				ci(n), ci(nh), ci(nkv), ci(hd), C.T2_ATT_FA2)
		})
	}
	if nitems > 0 {
		s.do("paged", func() C.t2_status {
			return C.t2_paged_attention(f32p(partO), f32p(partLse), dq, ci(QD), bufK, bufV, i32p(tables), i32p(items),
				ci(nitems), ci(pr.kv.BlockSize), ci(nh), ci(nkv), ci(hd), ci(p.maxRows))
		})
	}
	if nm > 0 {
		s.do("paged mma", func() C.t2_status {
			return C.t2_paged_attention_mma(f32p(partO), f32p(partLse), dq, ci(QD), bufK, bufV, i32p(tables),
				i32p(off(items, len(p.items), 4)), i32p(off(items, len(p.items)+len(p.mitems), 4)), ci(nm),
				ci(pr.kv.BlockSize), ci(nkv), ci(hd))
		})
	}
	if nitems+nm > 0 {
		s.do("merge", func() C.t2_status {
			return C.t2_paged_merge(datt, f32p(lse), f32p(partO), f32p(partLse), i32p(info), ci(n), ci(nh), ci(nkv), ci(hd), hasBase)
		})
	}
	if err := s.finish("serve attention"); err != nil {
		return nil, nil, nil, err
	}
	att, cacheK, cacheV = make([]uint16, n*QD), make([]uint16, len(pr.cacheK)), make([]uint16, len(pr.cacheV))
	for _, u := range []struct {
		dst []uint16
		src dptr
	}{{att, datt}, {cacheK, bufK}, {cacheV, bufV}} {
		if err := statusErr(C.t2_d2h(unsafe.Pointer(&u.dst[0]), u.src, C.size_t(2*len(u.dst)))); err != nil {
			return nil, nil, nil, err
		}
	}
	return att, cacheK, cacheV, nil
}

// runSampler runs the device sampler on rows of bf16 logits (bits, [rows, v]) with one parameter
// set and uniform per row.
func runSampler(logits []uint16, v int, params []gpu.SampleParams, u []float64) ([]gpu.Sampled, error) {
	rows := len(params)
	if len(logits) != rows*v || len(u) != rows {
		return nil, fmt.Errorf("cuda: sampler problem: sizes")
	}
	fp := make([]float32, 0, 3*rows)
	tk := make([]int32, rows)
	for i, p := range params {
		fp = append(fp, p.Temperature, p.TopP, p.MinP)
		tk[i] = p.TopK
	}
	var g group
	defer g.free()
	dl, dfp, dtk, du, dout := g.get(2*len(logits)), g.get(4*len(fp)), g.get(4*rows), g.get(8*rows), g.get(8*rows)
	if g.err != nil {
		return nil, g.err
	}
	for _, err := range []error{h2d(dl, logits), h2d(dfp, fp), h2d(dtk, tk), h2d(du, u)} {
		if err != nil {
			return nil, err
		}
	}
	s := &seq{}
	s.do("sample", func() C.t2_status {
		return C.t2_sample(i32p(dout), dl, f32p(dfp), i32p(dtk), (*C.double)(du), ci(rows), ci(v))
	})
	if err := s.finish("sampler"); err != nil {
		return nil, err
	}
	raw := make([]int32, 2*rows)
	if err := statusErr(C.t2_d2h(unsafe.Pointer(&raw[0]), dout, C.size_t(4*len(raw)))); err != nil {
		return nil, err
	}
	out := make([]gpu.Sampled, rows)
	for i := range out {
		out[i] = gpu.Sampled{Token: raw[2*i], LogProb: math.Float32frombits(uint32(raw[2*i+1]))}
	}
	return out, nil
}

// fillCacheRandom fills the whole KV cache with pseudo-random values (benchmarks: decode timing
// without a prefill of every context).
func (d *Decoder) fillCacheRandom(seed uint32) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	count := d.cacheBytes() / 2
	if err := statusErr(C.t2_fill_random_bf16(d.kc, C.size_t(count), C.uint32_t(seed), 1)); err != nil {
		return err
	}
	if err := statusErr(C.t2_fill_random_bf16(d.vc, C.size_t(count), C.uint32_t(seed+1), 1)); err != nil {
		return err
	}
	return syncDevice()
}

// copyBandwidth measures device-to-device copy bandwidth (bytes read + written per second) over a
// 1 GiB buffer, the median of 9 copies.
func copyBandwidth() (float64, error) {
	const bytes = 1 << 30
	var g group
	defer g.free()
	a, b := g.get(bytes), g.get(bytes)
	if g.err != nil {
		return 0, g.err
	}
	var ts []float64
	for i := range 10 {
		t0 := nowSec()
		if err := statusErr(C.t2_d2d(b, a, bytes)); err != nil {
			return 0, err
		}
		if err := syncDevice(); err != nil {
			return 0, err
		}
		if i > 0 {
			ts = append(ts, nowSec()-t0)
		}
	}
	return 2 * bytes / median(ts), nil
}

func nowSec() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

// matmulPeak measures the dense bf16 matmul rate (FLOP/s) of the decoder's GEMM path on an
// 8192³ product (cuBLAS through t2_linear_fwd), the median of 5 after a warm-up: the compute
// floor of a serving benchmark's prefill work.
func (d *Decoder) matmulPeak() (float64, error) {
	if err := d.enter(); err != nil {
		return 0, err
	}
	defer d.leave()
	const n = 8192
	var g group
	defer g.free()
	x, w, y := g.get(2*n*n), g.get(2*n*n), g.get(2*n*n)
	if g.err != nil {
		return 0, g.err
	}
	if err := statusErr(C.t2_fill_random_bf16(x, n*n, 1, 1)); err != nil {
		return 0, err
	}
	if err := statusErr(C.t2_fill_random_bf16(w, n*n, 2, 0.01)); err != nil {
		return 0, err
	}
	var ts []float64
	for i := range 6 {
		t0 := nowSec()
		if err := statusErr(C.t2_linear_fwd(d.ctx, y, x, w, n, n, n)); err != nil {
			return 0, err
		}
		if err := syncDevice(); err != nil {
			return 0, err
		}
		if i > 0 {
			ts = append(ts, nowSec()-t0)
		}
	}
	return 2 * float64(n) * n * n / median(ts), nil
}
