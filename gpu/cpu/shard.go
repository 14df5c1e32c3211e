package cpu

import (
	"errors"
	"fmt"
	"math"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
)

// This file makes the backend one rank of gpu/dp's ZeRO-style data parallelism (gpu.Sharder).
// The fp32 parameters are both the working and the master weights here, so a rank keeps all of
// them (its forward pass needs them) and shards only the AdamW moments; the shard's master block
// is its block of the parameters.

var (
	_ gpu.Sharder = (*Backend)(nil)

	errSharded = errors.New("cpu: the backend is a data-parallel rank: its optimizer state is sharded; step and save it through gpu/dp")
)

// FlatLayout is the dense ParamSpecs-order layout of the parameter buffer.
func (b *Backend) FlatLayout() gpu.FlatLayout {
	specs := gpu.ParamSpecs(b.m.cfg)
	l := gpu.FlatLayout{Kind: "dense", Offsets: make([]int, len(specs))}
	for i, s := range specs {
		l.Offsets[i] = l.Len
		l.Len += s.Size()
	}
	return l
}

// Shard pads the parameter and gradient buffers to world equal shards and keeps the moments of
// shard rank only.
func (b *Backend) Shard(rank, world int) (gpu.Shard, error) {
	if b.closed {
		return gpu.Shard{}, errClosed
	}
	if b.shard != nil {
		return gpu.Shard{}, fmt.Errorf("cpu: backend is already rank %d of %d", b.shard.Rank, b.shard.World)
	}
	n := len(b.m.params)
	sh, err := gpu.ShardBounds(n, world, rank, 1)
	if err != nil {
		return gpu.Shard{}, fmt.Errorf("cpu: %w", err)
	}
	padded := sh.Len * world
	params, grads := make([]float32, padded), make([]float32, padded)
	copy(params, b.m.params)
	copy(grads, b.m.grads)
	b.m.params, b.m.grads = params, grads
	b.m.p, b.m.g = views(b.m.cfg, params[:n]), views(b.m.cfg, grads[:n])
	m1, m2 := make([]float32, sh.Len), make([]float32, sh.Len)
	if sh.Lo < n {
		copy(m1, b.m1[sh.Lo:min(n, sh.Lo+sh.Len)])
		copy(m2, b.m2[sh.Lo:min(n, sh.Lo+sh.Len)])
	}
	b.m1, b.m2 = m1, m2
	// The reduce-scatter runs in place: the shard's gradient is its block of the accumulator.
	b.gshard = grads[sh.Lo : sh.Lo+sh.Len : sh.Lo+sh.Len]
	b.shard = &sh
	return sh, nil
}

func (b *Backend) sharded() error {
	if b.closed {
		return errClosed
	}
	if b.shard == nil {
		return errors.New("cpu: backend is not sharded (call Shard first)")
	}
	return nil
}

// GradBuffer is the full (padded) gradient accumulator.
func (b *Backend) GradBuffer() (collective.Buffer, error) {
	return collective.HostBuffer(b.m.grads), nil
}

// GradShard receives the reduce-scattered gradient of the shard: the shard's own block of
// GradBuffer (an in-place reduce-scatter, no extra memory).
func (b *Backend) GradShard() collective.Buffer { return collective.HostBuffer(b.gshard) }

// ParamShard is the all-gather of the fp32 parameters: the shard's block and the whole buffer.
func (b *Backend) ParamShard() (own, full collective.Buffer) {
	lo, hi := b.shard.Lo, b.shard.Lo+b.shard.Len
	return collective.HostBuffer(b.m.params[lo:hi:hi]), collective.HostBuffer(b.m.params)
}

// ShardSumSq is Σ g² over the reduce-scattered shard gradient.
func (b *Backend) ShardSumSq() (float64, error) {
	if err := b.sharded(); err != nil {
		return 0, err
	}
	n := globalNorm(b.gshard)
	return n * n, nil
}

// ShardStep applies AdamW to the shard's block of the parameters and zeroes the gradients.
func (b *Backend) ShardStep(opt gpu.Optimizer, gradScale float64) error {
	if err := b.sharded(); err != nil {
		return err
	}
	if err := opt.Validate(); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	if math.IsNaN(gradScale) || math.IsInf(gradScale, 0) {
		return fmt.Errorf("cpu: gradient scale %v is not finite", gradScale)
	}
	b.last = nil
	b.step++
	lo, hi := b.shard.Lo, b.shard.Lo+b.shard.Len
	adamwUpdate(b.m.params[lo:hi], b.gshard, b.m1, b.m2, gradScale, b.step,
		opt.LR, opt.Beta1, opt.Beta2, opt.Eps, opt.WeightDecay)
	clear(b.m.grads)
	return nil
}

// ZeroGrads drops accumulated gradients and the last Forward.
func (b *Backend) ZeroGrads() error {
	if b.closed {
		return errClosed
	}
	b.last = nil
	clear(b.m.grads)
	return nil
}

// ShardState copies the shard's master block, moments and step count.
func (b *Backend) ShardState() (gpu.ShardState, error) {
	if err := b.sharded(); err != nil {
		return gpu.ShardState{}, err
	}
	own, _ := b.ParamShard()
	return gpu.ShardState{
		Master: append([]float32(nil), own.Host...), ExpAvg: append([]float32(nil), b.m1...),
		ExpAvgSq: append([]float32(nil), b.m2...), Step: b.step,
	}, nil
}

// SetShardState replaces the shard's master block, moments and step count; gradients and the
// last Forward are dropped.
func (b *Backend) SetShardState(st gpu.ShardState) error {
	if err := b.sharded(); err != nil {
		return err
	}
	n := b.shard.Len
	if len(st.Master) != n || len(st.ExpAvg) != n || len(st.ExpAvgSq) != n || st.Step < 0 {
		return fmt.Errorf("cpu: shard state of %d/%d/%d elements at step %d for a %d-element shard",
			len(st.Master), len(st.ExpAvg), len(st.ExpAvgSq), st.Step, n)
	}
	own, _ := b.ParamShard()
	copy(own.Host, st.Master)
	copy(b.m1, st.ExpAvg)
	copy(b.m2, st.ExpAvgSq)
	b.step = st.Step
	return b.ZeroGrads()
}

// HeldBytes is the memory of the parameter, gradient and optimizer-state buffers (activations
// excluded), what gpu/dp's memory model predicts for the cpu backend.
func (b *Backend) HeldBytes() int64 {
	return 4 * int64(len(b.m.params)+len(b.m.grads)+len(b.m1)+len(b.m2))
}
