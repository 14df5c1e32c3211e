//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/safetensors"
)

// This file makes the backend one rank of gpu/dp's ZeRO-style data parallelism (gpu.Sharder).
// After Shard the device holds, per parameter: the bf16 working weights (2 bytes, all of them: the
// kernels read them), the fp32 gradient accumulator (4 bytes, all of them), and for the rank's
// shard only the fp32 master weights and both AdamW moments (12 bytes ÷ world size). The
// reduce-scatter runs in place (the shard's gradient is its block of the accumulator) and the
// all-gather moves the bf16 working weights (half the bytes of fp32). gpu/dp's MemoryModel is this
// accounting; TestShardMemoryModel checks it against HeldBytes and cudaMemGetInfo.

var (
	_ gpu.Sharder = (*Backend)(nil)

	errSharded = errors.New("cuda: the backend is a data-parallel rank: its optimizer state is sharded; step and save it through gpu/dp")
)

// shardAlign keeps every shard boundary 64 elements (256 bytes of fp32) aligned, like the tensors.
const shardAlign = 64

// FlatLayout is the 64-element-aligned ParamSpecs-order layout of the flat buffers.
func (b *Backend) FlatLayout() gpu.FlatLayout {
	l := gpu.FlatLayout{Kind: "align64", Offsets: make([]int, len(b.specs))}
	for i, s := range b.specs {
		l.Offsets[i] = b.offs[s.Name]
		l.Len = max(l.Len, b.offs[s.Name]+s.Size())
	}
	return l
}

// Shard pads param and grad to world equal shards and keeps master, m and v for shard rank only
// (the values already there for that range are kept). On a backend already rank `rank` of
// `world` (NewShard) it returns that shard and changes nothing.
func (b *Backend) Shard(rank, world int) (gpu.Shard, error) {
	if err := b.enter(); err != nil {
		return gpu.Shard{}, err
	}
	defer b.leave()
	if b.shard != nil {
		if b.shard.Rank == rank && b.shard.World == world { // built sharded (NewShard)
			return *b.shard, nil
		}
		return gpu.Shard{}, fmt.Errorf("cuda: backend is already rank %d of %d", b.shard.Rank, b.shard.World)
	}
	// The gradients move to the padded buffer below, so their values must be real ones: a stale
	// buffer (after a Step, or a new backend's) is zeroed first.
	if err := b.clearStaleGrads(); err != nil {
		return gpu.Shard{}, err
	}
	if b.stateErr != nil {
		return gpu.Shard{}, fmt.Errorf("cuda: shard: %w", b.stateErr)
	}
	sh, err := gpu.ShardBounds(b.total, world, rank, shardAlign)
	if err != nil {
		return gpu.Shard{}, fmt.Errorf("cuda: %w", err)
	}
	padded := sh.Len * world
	type move struct {
		dst           *dptr
		elem, n       int // element size and the new buffer's elements
		srcLo, copyN  int // elements copied from the old buffer, starting at srcLo
		oldBytesTotal int
	}
	keep := max(0, min(sh.Lo+sh.Len, b.total)-sh.Lo)
	moves := []move{
		{&b.param, 2, padded, 0, b.total, 2 * b.total},
		{&b.grad, 4, padded, 0, b.total, 4 * b.total},
		{&b.master, 4, sh.Len, sh.Lo, keep, 4 * b.total},
		{&b.m, 4, sh.Len, sh.Lo, keep, 4 * b.total},
		{&b.v, 4, sh.Len, sh.Lo, keep, 4 * b.total},
	}
	// Allocate everything first, so a failure leaves the backend as it was.
	fresh := make([]dptr, len(moves))
	for i, mv := range moves {
		p, err := malloc(mv.elem * mv.n)
		if err == nil {
			err = memset0(p, mv.elem*mv.n)
		}
		if err == nil && mv.copyN > 0 {
			err = statusErr(C.t2_d2d(p, off(*mv.dst, mv.srcLo, mv.elem), csz(mv.elem*mv.copyN)))
		}
		if err != nil {
			for _, q := range fresh[:i] {
				free(q)
			}
			if p != nil {
				free(p)
			}
			return gpu.Shard{}, fmt.Errorf("cuda: shard buffers: %w", err)
		}
		fresh[i] = p
	}
	if err := syncDevice(); err != nil {
		return gpu.Shard{}, fmt.Errorf("cuda: shard buffers: %w", err)
	}
	for i, mv := range moves {
		if err := free(*mv.dst); err != nil {
			return gpu.Shard{}, fmt.Errorf("cuda: free unsharded buffer: %w", err)
		}
		*mv.dst = fresh[i]
		b.held += int64(mv.elem*mv.n) - int64(mv.oldBytesTotal)
	}
	b.total = padded
	b.shard = &sh
	return sh, nil
}

// sharded is enter for the shard operations: it also requires Shard to have run. On success the
// caller holds the pin and must defer leave.
func (b *Backend) sharded() error {
	if err := b.enter(); err != nil {
		return err
	}
	if b.shard == nil {
		b.leave()
		return errors.New("cuda: backend is not sharded (call Shard first)")
	}
	return nil
}

// GradBuffer is the full (padded) fp32 gradient accumulator on the device. A rank that ran no
// Backward since its last ShardStep still holds that step's values (gradsStale): they are zeroed
// here, so its share of the reduce-scatter is zero.
func (b *Backend) GradBuffer() (collective.Buffer, error) {
	if err := b.enter(); err != nil {
		return collective.Buffer{}, err
	}
	defer b.leave()
	if err := b.clearStaleGrads(); err != nil {
		return collective.Buffer{}, err
	}
	return collective.DeviceBuffer(b.grad, b.total, collective.F32), nil
}

// GradShard is the shard's block of the accumulator: the reduce-scatter runs in place.
func (b *Backend) GradShard() collective.Buffer {
	return collective.DeviceBuffer(off(b.grad, b.shard.Lo, 4), b.shard.Len, collective.F32)
}

// ParamShard is the all-gather of the bf16 working weights.
func (b *Backend) ParamShard() (own, full collective.Buffer) {
	return collective.DeviceBuffer(off(b.param, b.shard.Lo, 2), b.shard.Len, collective.BF16),
		collective.DeviceBuffer(b.param, b.total, collective.BF16)
}

// ShardSumSq is Σ g² over the shard's reduced gradient.
func (b *Backend) ShardSumSq() (float64, error) {
	if err := b.sharded(); err != nil {
		return 0, err
	}
	defer b.leave()
	var ss C.double
	if err := statusErr(C.t2_sumsq(&ss, f32p(b.partial), f32p(off(b.grad, b.shard.Lo, 4)), csz(b.shard.Len))); err != nil {
		return 0, fmt.Errorf("cuda: shard gradient norm: %w", err)
	}
	return float64(ss), nil
}

// ShardStep runs the AdamW kernel over the shard (master, moments, and the shard's bf16 working
// weights) and leaves the gradient accumulator stale, as Step does (gradsStale): the next Backward
// overwrites it, and GradBuffer zeroes it on a rank that runs none. The memset this replaces wrote
// 4 bytes per parameter on every rank each step (6.9 GB at 1.7B, 33 GB at 8B).
func (b *Backend) ShardStep(opt gpu.Optimizer, gradScale float64) error {
	if err := b.sharded(); err != nil {
		return err
	}
	defer b.leave()
	if err := opt.Validate(); err != nil {
		return err
	}
	if math.IsNaN(gradScale) || math.IsInf(gradScale, 0) {
		return fmt.Errorf("cuda: gradient scale %v is not finite", gradScale)
	}
	b.haveForward = false
	b.step++
	bc1 := 1 - math.Pow(opt.Beta1, float64(b.step))
	bc2 := 1 - math.Pow(opt.Beta2, float64(b.step))
	s := b.newSeq()
	lo, n := b.shard.Lo, b.shard.Len
	s.do("adamw (shard)", func() C.t2_status {
		return C.t2_adamw(f32p(b.master), off(b.param, lo, 2), f32p(off(b.grad, lo, 4)), f32p(b.m), f32p(b.v), csz(n),
			C.float(opt.LR), C.float(opt.Beta1), C.float(opt.Beta2), C.float(opt.Eps), C.float(opt.WeightDecay),
			C.float(gradScale), C.float(bc1), C.float(bc2))
	})
	if err := s.finish("adamw (shard)"); err != nil {
		return err
	}
	b.gradsStale = true
	return nil
}

// ZeroGrads zeroes the gradient accumulator and drops the last Forward. The zeroing is lazy, as
// after a Step (gradsStale): the next backward pass overwrites the buffer, and any other reader
// clears it first (clearStaleGrads, the one place that writes the zeros).
func (b *Backend) ZeroGrads() error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	b.haveForward = false
	b.gradsStale = true
	return nil
}

// ShardState copies the shard's master weights, moments and step count to the host.
func (b *Backend) ShardState() (gpu.ShardState, error) {
	if err := b.sharded(); err != nil {
		return gpu.ShardState{}, err
	}
	defer b.leave()
	n := b.shard.Len
	st := gpu.ShardState{Master: make([]float32, n), ExpAvg: make([]float32, n), ExpAvgSq: make([]float32, n), Step: b.step}
	for _, c := range []struct {
		dst []float32
		src dptr
	}{{st.Master, b.master}, {st.ExpAvg, b.m}, {st.ExpAvgSq, b.v}} {
		if err := d2hF32(c.dst, c.src); err != nil {
			return gpu.ShardState{}, fmt.Errorf("cuda: download shard state: %w", err)
		}
	}
	return st, nil
}

// SetShardState uploads the shard's master weights, moments and step count, refreshes the shard's
// bf16 working weights and zeroes the gradients (gpu/dp all-gathers the working weights next).
func (b *Backend) SetShardState(st gpu.ShardState) error {
	if err := b.sharded(); err != nil {
		return err
	}
	defer b.leave()
	n := b.shard.Len
	if len(st.Master) != n || len(st.ExpAvg) != n || len(st.ExpAvgSq) != n || st.Step < 0 {
		return fmt.Errorf("cuda: shard state of %d/%d/%d elements at step %d for a %d-element shard",
			len(st.Master), len(st.ExpAvg), len(st.ExpAvgSq), st.Step, n)
	}
	for _, c := range []struct {
		dst dptr
		src []float32
	}{{b.master, st.Master}, {b.m, st.ExpAvg}, {b.v, st.ExpAvgSq}} {
		if err := h2dF32(c.dst, c.src); err != nil {
			b.stateErr = fmt.Errorf("shard state half uploaded (%v); load it again", err)
			return fmt.Errorf("cuda: upload shard state: %w", err)
		}
	}
	if err := statusErr(C.t2_f32_to_bf16(off(b.param, b.shard.Lo, 2), f32p(b.master), csz(n))); err != nil {
		return fmt.Errorf("cuda: bf16 copy of the shard: %w", err)
	}
	b.step = st.Step
	b.stateErr = nil
	return b.ZeroGrads()
}

// weightTensor is tensor s of the fp32 master weights, or, on a sharded backend (which holds only
// its shard of the masters), of the bf16 working weights widened to fp32: after every step they
// are the masters rounded to bf16, which is what a bfloat16 checkpoint holds anyway.
func (b *Backend) weightTensor(s gpu.ParamSpec) ([]float32, error) {
	if b.shard == nil {
		return b.tensor(b.master, s)
	}
	raw := make([]uint16, s.Size())
	if len(raw) > 0 {
		if err := statusErr(C.t2_d2h(unsafe.Pointer(&raw[0]), off(b.param, b.offs[s.Name], 2), csz(2*len(raw)))); err != nil {
			return nil, fmt.Errorf("cuda: download %s: %w", s.Name, err)
		}
	}
	out := make([]float32, len(raw))
	safetensors.Float32sFromBF16(out, raw)
	return out, nil
}
