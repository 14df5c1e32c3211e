//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"tau2rl/gpu/safetensors"
)

// dptrOf is the address of a non-empty host slice, for t2_h2d / t2_d2h.
func dptrOf(s []uint16) unsafe.Pointer { return unsafe.Pointer(&s[0]) }

// attnInputs is one standalone tree-attention problem on the host, for checking and timing the
// attention kernels apart from the model (the backend calls them from layer.go on its own buffers).
// Tensors are bf16 bit patterns, row-major: q and dout [n, nh·d], k and v [n, nkv·d].
type attnInputs struct {
	n, nh, nkv, d int
	q, k, v, dout []uint16
	subtreeEnd    []int32
}

// attnOutputs are the kernels' results (bf16 bits, dq rounded from the kernels' fp32; lse is the base-2 log of the softmax
// denominator of the log2(e)/sqrt(d)-scaled scores) and, when timed, the median milliseconds of
// one forward and one backward launch sequence.
type attnOutputs struct {
	out, dq, dk, dv []uint16
	lse             []float32
	fwdMS, bwdMS    float64
}

func (in *attnInputs) check() error {
	n, qd, kd := in.n, in.nh*in.d, in.nkv*in.d
	if n <= 0 || in.nh <= 0 || in.nkv <= 0 || in.nh%in.nkv != 0 {
		return fmt.Errorf("cuda: attention problem n=%d nh=%d nkv=%d", n, in.nh, in.nkv)
	}
	if len(in.q) != n*qd || len(in.dout) != n*qd || len(in.k) != n*kd || len(in.v) != n*kd || len(in.subtreeEnd) != n {
		return fmt.Errorf("cuda: attention problem: tensor lengths do not match n=%d nh=%d nkv=%d d=%d", n, in.nh, in.nkv, in.d)
	}
	for j, e := range in.subtreeEnd {
		if int(e) < j || int(e) >= n {
			return fmt.Errorf("cuda: attention problem: subtree_end[%d] = %d outside [%d, %d)", j, e, j, n)
		}
	}
	return nil
}

// runAttention runs the forward and backward tree-attention kernels of impl (an Options.Attention
// value) once on device 0, with every output poisoned (all bits set: bf16/fp32 NaN)
// beforehand so an element the kernels fail to write shows up as NaN. With reps > 0 it then
// times reps forward and reps backward launches with device events and reports the medians.
func runAttention(in *attnInputs, impl string, reps int) (res *attnOutputs, err error) {
	if err := in.check(); err != nil {
		return nil, err
	}
	if impl == "" || !slices.Contains(attentionNames, impl) {
		return nil, fmt.Errorf("cuda: attention impl %q", impl)
	}
	var ctx dptr
	if err := statusErr(C.t2_init(0, &ctx)); err != nil {
		return nil, fmt.Errorf("cuda: init: %w", err)
	}
	// the kernels that run here, as New chooses them ("hopper" refused with the reason where the
	// device or the build lacks wgmma)
	if impl, err = resolveAttention(impl, 0); err != nil {
		return nil, errors.Join(err, statusErr(C.t2_destroy(ctx)))
	}
	sel := attImplOf(impl)
	var ptrs []dptr
	defer func() {
		for _, p := range ptrs {
			err = errors.Join(err, free(p))
		}
		err = errors.Join(err, statusErr(C.t2_destroy(ctx)))
	}()
	alloc := func(bytes int) (dptr, error) {
		p, err := malloc(bytes)
		if err == nil {
			ptrs = append(ptrs, p)
		}
		return p, err
	}
	n, qd, kd := in.n, in.nh*in.d, in.nkv*in.d
	type buf struct {
		p     *dptr
		bytes int
	}
	var q, k, v, dout, send, bmax, out, lse, dq, dk, dv, di, dqBF dptr
	for _, b := range []buf{
		{&q, 2 * n * qd}, {&k, 2 * n * kd}, {&v, 2 * n * kd}, {&dout, 2 * n * qd}, {&send, 4 * n}, {&bmax, blockmaxBytes(n)},
		{&out, 2 * n * qd}, {&lse, 4 * n * in.nh}, {&dq, 4 * n * qd}, {&dk, 2 * n * kd}, {&dv, 2 * n * kd}, {&di, 4 * n * in.nh},
		{&dqBF, 2 * n * qd},
	} {
		if *b.p, err = alloc(b.bytes); err != nil {
			return nil, err
		}
		if err := statusErr(C.t2_memset(*b.p, 0xff, C.size_t(b.bytes))); err != nil {
			return nil, err
		}
	}
	for _, u := range []struct {
		dst dptr
		src []uint16
	}{{q, in.q}, {k, in.k}, {v, in.v}, {dout, in.dout}} {
		if err := statusErr(C.t2_h2d(u.dst, dptrOf(u.src), C.size_t(2*len(u.src)))); err != nil {
			return nil, fmt.Errorf("cuda: upload: %w", err)
		}
	}
	if err := h2dI32(send, in.subtreeEnd); err != nil {
		return nil, fmt.Errorf("cuda: upload: %w", err)
	}
	if err := statusErr(C.t2_tree_blockmax(i32p(bmax), i32p(send), ci(n))); err != nil {
		return nil, err
	}
	fwd := func() C.t2_status {
		return C.t2_attention_fwd(out, f32p(lse), q, k, v, ci(qd), ci(kd), ci(kd), i32p(send), i32p(bmax), ci(n),
			ci(in.nh), ci(in.nkv), ci(in.d), sel)
	}
	bwd := func() C.t2_status {
		return C.t2_attention_bwd(f32p(dq), dk, ci(kd), dv, ci(kd), f32p(di), dqBF, dout, out, f32p(lse), q, k, v, ci(qd), ci(kd),
			ci(kd), i32p(send), i32p(bmax), ci(n), ci(in.nh), ci(in.nkv), ci(in.d), sel)
	}
	if err := statusErr(fwd()); err != nil {
		return nil, fmt.Errorf("cuda: attention forward: %w", err)
	}
	if err := statusErr(bwd()); err != nil {
		return nil, fmt.Errorf("cuda: attention backward: %w", err)
	}
	if err := syncDevice(); err != nil {
		return nil, fmt.Errorf("cuda: attention: %w", err)
	}
	res = &attnOutputs{
		out: make([]uint16, n*qd), dq: make([]uint16, n*qd), dk: make([]uint16, n*kd), dv: make([]uint16, n*kd),
		lse: make([]float32, n*in.nh),
	}
	for _, d := range []struct {
		dst []uint16
		src dptr
	}{{res.out, out}, {res.dk, dk}, {res.dv, dv}} {
		if err := statusErr(C.t2_d2h(dptrOf(d.dst), d.src, C.size_t(2*len(d.dst)))); err != nil {
			return nil, fmt.Errorf("cuda: download: %w", err)
		}
	}
	dq32 := make([]float32, n*qd)
	if err := d2hF32(dq32, dq); err != nil {
		return nil, fmt.Errorf("cuda: download: %w", err)
	}
	for i, x := range dq32 { // the rounding the q/k-norm backward applies when it reads dq
		res.dq[i] = safetensors.BF16FromFloat32(x)
	}
	if err := d2hF32(res.lse, lse); err != nil {
		return nil, fmt.Errorf("cuda: download: %w", err)
	}
	if reps > 0 {
		timeIt := func(f func() C.t2_status) (float64, error) {
			ms := make([]float64, reps)
			for r := range ms {
				var t C.float
				if err := statusErr(C.t2_event_time(ctx, 1, &t)); err != nil {
					return 0, err
				}
				if err := statusErr(f()); err != nil {
					return 0, err
				}
				if err := statusErr(C.t2_event_time(ctx, 0, &t)); err != nil {
					return 0, err
				}
				ms[r] = float64(t)
			}
			slices.Sort(ms)
			return ms[reps/2], nil
		}
		if res.fwdMS, err = timeIt(fwd); err != nil {
			return nil, fmt.Errorf("cuda: time attention forward: %w", err)
		}
		if res.bwdMS, err = timeIt(bwd); err != nil {
			return nil, fmt.Errorf("cuda: time attention backward: %w", err)
		}
	}
	return res, nil
}
