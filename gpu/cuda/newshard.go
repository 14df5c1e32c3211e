//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"fmt"
	"runtime"

	"tau2rl/gpu"
)

// NewShard builds rank `rank` of a `world`-rank data-parallel group directly, without first
// holding the whole optimizer state: the result is the backend New(w, opt) followed by
// Shard(rank, world) would give, but it never allocates the unsharded fp32 master weights and
// moments. New allocates 18 bytes per parameter before Shard gives 12 ÷ world of them back —
// 137 GiB for Qwen3-8B, more than an 80 GB GPU — so an 8B rank can only be built this way
// (2 + 4 + 12 ÷ world bytes per parameter: 57 GiB at world 8, docs/MULTIGPU.md).
//
// The host weights w are only read, so the ranks of one process can be built from one copy at
// once (the trainer loads a checkpoint once for all its GPUs). The bf16 working weights are made
// on the device one tensor at a time through a scratch buffer of the largest tensor.
func NewShard(w *gpu.Weights, opt Options, rank, world int) (*Backend, error) {
	b, err := describe(w, opt)
	if err != nil {
		return nil, err
	}
	pl := newParamLayout(b.cfg, b.specs)
	sh, err := gpu.ShardBounds(pl.total, world, rank, shardAlign)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	runtime.LockOSThread() // t2_init selects the device for this thread (see enter)
	defer runtime.UnlockOSThread()
	if err := b.open(); err != nil {
		return nil, err
	}
	b.offs, b.embed, b.norm, b.lmHead, b.layers = pl.offs, pl.embed, pl.norm, pl.lmHead, pl.layers
	padded := sh.Len * world
	for _, p := range []struct {
		dst     *dptr
		elem, n int
	}{{&b.param, 2, padded}, {&b.grad, 4, padded}, {&b.master, 4, sh.Len}, {&b.m, 4, sh.Len}, {&b.v, 4, sh.Len}} {
		if *p.dst, err = b.alloc(p.n * p.elem); err == nil {
			err = memset0(*p.dst, p.n*p.elem)
		}
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("cuda: rank %d of %d: %w", rank, world, err)
		}
	}
	if err := b.allocStepState(); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.uploadShard(w, sh); err != nil {
		b.Close()
		return nil, fmt.Errorf("cuda: rank %d of %d: %w", rank, world, err)
	}
	b.total = padded
	b.shard = &sh
	return b, nil
}

// LoadShard is NewShard over a Hugging Face checkpoint directory.
func LoadShard(dir string, opt Options, rank, world int) (*Backend, error) {
	w, err := gpu.LoadWeights(dir)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	return NewShard(w, opt, rank, world)
}

// uploadShard writes every tensor's bf16 working copy (all of them: the kernels read them) and
// the fp32 master weights of the shard's range [sh.Lo, sh.Lo+sh.Len) of the flat layout, which
// cuts across tensors. Elements of the range past the last tensor (padding) stay zero, as Shard
// leaves them.
func (b *Backend) uploadShard(w *gpu.Weights, sh gpu.Shard) error {
	largest := 0
	for _, s := range b.specs {
		largest = max(largest, s.Size())
	}
	scratch, err := malloc(4 * largest)
	if err != nil {
		return fmt.Errorf("scratch for the bf16 conversion: %w", err)
	}
	defer free(scratch)
	for _, s := range b.specs {
		t, o := w.Tensors[s.Name], b.offs[s.Name]
		if err := h2dF32(scratch, t); err != nil {
			return fmt.Errorf("upload %s: %w", s.Name, err)
		}
		if err := statusErr(C.t2_f32_to_bf16(b.pw(o), f32p(scratch), csz(len(t)))); err != nil {
			return fmt.Errorf("bf16 copy of %s: %w", s.Name, err)
		}
		// The part of this tensor inside the shard: flat [lo, hi) ∩ [o, o+len(t)).
		lo, hi := max(sh.Lo, o), min(sh.Lo+sh.Len, o+len(t))
		if lo < hi {
			if err := h2dF32(off(b.master, lo-sh.Lo, 4), t[lo-o:hi-o]); err != nil {
				return fmt.Errorf("upload the shard's part of %s: %w", s.Name, err)
			}
		}
		// The next tensor reuses the scratch buffer: the conversion must have read it.
		if err := syncDevice(); err != nil {
			return fmt.Errorf("bf16 copy of %s: %w", s.Name, err)
		}
	}
	return nil
}
