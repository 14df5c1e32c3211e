// Package dp is data parallelism over several model backends (GPUs, or goroutines of the pure-Go
// backend in tests) with ZeRO-style sharding: every rank runs forward and backward on its share
// of a step's prefix-tree micro-batches into its own gradient accumulator; at the optimizer step
// the gradients are reduce-scattered (each rank receives the sum over ranks of its shard of the
// flat gradient), each rank applies AdamW to its shard of the flat parameters with its shard of
// the optimizer state (fp32 master weights, both moments: 12 of the 18 bytes per parameter of a
// CUDA rank, divided by the world size), and the updated shards of the working weights are
// all-gathered. The global gradient norm (for clipping) is an all-reduce of the shards' Σg².
//
// A step over N ranks is the same function as the 1-rank step: the micro-batches' dlogp are
// normalised by the global loss-token count by the caller, gradients add up across ranks as they
// add up across micro-batches on one rank, and AdamW is element-wise. The CI tests in this package
// check it numerically for N = 2, 3, 4 against gpu/cpu on one rank.
//
// Group implements gpu.Backend (Forward/Backward/LogProbs run on the first local rank, Step is
// the collective step), so anything written against a Backend keeps working; the trainer uses
// Assign, LogProbsParallel and ForwardBackwardParallel to spread a step's micro-batches over the
// ranks by cost (tokens and visible attention pairs; see Assign). gpu.OptimizerStateSaver is
// implemented with one optimizer-state file per rank (state.go), readable back at any world size.
//
// One process drives all the GPUs of its host, one goroutine per GPU (see docs/MULTIGPU.md):
// a Group holds the local ranks, each with its gpu.Sharder backend and its collective.Comm end.
package dp

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
)

// rank is one local rank: a backend and its end of the communicator.
type rank struct {
	be    gpu.Backend
	sh    gpu.Sharder
	comm  collective.Comm
	shard gpu.Shard
}

// Group is the local ranks of a data-parallel world. It is not safe for concurrent use (like a
// Backend); its methods run the local ranks concurrently themselves.
type Group struct {
	cfg    gpu.Config
	ranks  []*rank
	world  int
	layout gpu.FlatLayout
	// params: the working weights are sharded too (Options.ShardParameters); units are the flat
	// ranges gathered whole (gpu.ParamUnits).
	params bool
	units  [][2]int
	// broken is set when a collective failed on a local rank: the communicator cannot be trusted
	// to be in step any more (other ranks may wait forever), so every later call fails.
	broken error
	closed bool
	// abortOnce closes the local comms once, from a failing rank or from Abort (another
	// goroutine); aborted is Abort's reason.
	abortOnce sync.Once
	abortMu   sync.Mutex
	aborted   error
}

var (
	_ gpu.Backend             = (*Group)(nil)
	_ gpu.OptimizerStateSaver = (*Group)(nil)
	_ gpu.WeightExporter      = (*Group)(nil)
)

// Options choose how much a Group shards.
type Options struct {
	// ShardParameters shards the working weights too (ZeRO-3): each unit (gpu.ParamUnits) is
	// gathered from its owners right before a pass reads it and released after. Every backend
	// must implement gpu.ParamSharder (gpu/cpu does; gpu/cuda does not yet), and every rank of the
	// world must be driven by this Group (plain Forward/Backward need all ranks to take part).
	ShardParameters bool
}

// New makes backends[i] rank comms[i].Rank() of a comms[i].Size()-rank world. Every backend must
// implement gpu.Sharder, hold the same model config and the same weights (they load the same
// checkpoint), and every comm must belong to the same communicator. New shards the backends'
// optimizer state (and, with opts ShardParameters, their working weights); the Group owns
// backends and comms from then on (Close closes them).
func New(backends []gpu.Backend, comms []collective.Comm, opts ...Options) (*Group, error) {
	var opt Options
	for _, o := range opts {
		opt = o
	}
	if len(backends) == 0 || len(backends) != len(comms) {
		return nil, fmt.Errorf("dp: %d backends and %d comms: want the same positive number", len(backends), len(comms))
	}
	g := &Group{cfg: backends[0].Config(), world: comms[0].Size()}
	seen := map[int]bool{}
	for i, be := range backends {
		sh, ok := be.(gpu.Sharder)
		if !ok {
			return nil, fmt.Errorf("dp: backend %T cannot be a data-parallel rank (it does not implement gpu.Sharder)", be)
		}
		c := comms[i]
		if c.Size() != g.world {
			return nil, fmt.Errorf("dp: comm %d has world size %d, comm 0 has %d", i, c.Size(), g.world)
		}
		if seen[c.Rank()] {
			return nil, fmt.Errorf("dp: rank %d given twice", c.Rank())
		}
		seen[c.Rank()] = true
		if !reflect.DeepEqual(be.Config(), g.cfg) {
			return nil, fmt.Errorf("dp: backend %d has a different model config", i)
		}
		l := sh.FlatLayout()
		if i == 0 {
			g.layout = l
		} else if !sameLayout(l, g.layout) {
			return nil, fmt.Errorf("dp: backend %d has flat layout %q/%d, backend 0 %q/%d", i, l.Kind, l.Len, g.layout.Kind, g.layout.Len)
		}
		g.ranks = append(g.ranks, &rank{be: be, sh: sh, comm: c})
	}
	err := g.each(func(_ int, r *rank) error {
		s, err := r.sh.Shard(r.comm.Rank(), g.world)
		r.shard = s
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dp: shard: %w", err)
	}
	if opt.ShardParameters {
		if err := g.shardParams(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func sameLayout(a, b gpu.FlatLayout) bool {
	if a.Kind != b.Kind || a.Len != b.Len || len(a.Offsets) != len(b.Offsets) {
		return false
	}
	for i := range a.Offsets {
		if a.Offsets[i] != b.Offsets[i] {
			return false
		}
	}
	return true
}

// World is the number of ranks over all hosts.
func (g *Group) World() int { return g.world }

// LocalRanks lists the global ranks this Group drives, in the order of New's arguments.
func (g *Group) LocalRanks() []int {
	out := make([]int, len(g.ranks))
	for i, r := range g.ranks {
		out[i] = r.comm.Rank()
	}
	return out
}

// Shards returns the local ranks' shards (tests, logs).
func (g *Group) Shards() []gpu.Shard {
	out := make([]gpu.Shard, len(g.ranks))
	for i, r := range g.ranks {
		out[i] = r.shard
	}
	return out
}

// Backends returns the local ranks' backends (tests, memory reports).
func (g *Group) Backends() []gpu.Backend {
	out := make([]gpu.Backend, len(g.ranks))
	for i, r := range g.ranks {
		out[i] = r.be
	}
	return out
}

func (g *Group) usable() error {
	if g.closed {
		return errors.New("dp: group is closed")
	}
	if g.broken != nil {
		return g.broken
	}
	if cause := g.abortCause(); cause != nil {
		return fmt.Errorf("dp: the data-parallel group was aborted (restart from the last checkpoint): %w", cause)
	}
	return nil
}

// each runs f on every local rank concurrently (one goroutine per GPU) and joins their errors.
func (g *Group) each(f func(i int, r *rank) error) error {
	errs := make([]error, len(g.ranks))
	if len(g.ranks) == 1 {
		errs[0] = f(0, g.ranks[0])
	} else {
		var wg sync.WaitGroup
		for i, r := range g.ranks {
			wg.Go(func() { errs[i] = f(i, r) })
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err != nil {
			errs[i] = fmt.Errorf("rank %d: %w", g.ranks[i].comm.Rank(), err)
		}
	}
	return errors.Join(errs...)
}

// collective runs f, which issues collectives, on every local rank. A failure breaks the group:
// the other ranks may be waiting inside a collective this rank will never join, so the first
// failure closes every local comm at once (which fails the in-process peers' pending collectives,
// and aborts NCCL's), and the process must restart from its last checkpoint.
func (g *Group) collective(what string, f func(i int, r *rank) error) error {
	err := g.each(func(i int, r *rank) error {
		err := f(i, r)
		if err != nil {
			g.closeComms()
		}
		return err
	})
	if err != nil {
		if cause := g.abortCause(); cause != nil {
			err = fmt.Errorf("aborted (%w): %w", cause, err)
		}
		g.broken = fmt.Errorf("dp: %s failed, the data-parallel group is unusable (restart from the last checkpoint): %w", what, err)
		return g.broken
	}
	return nil
}

func (g *Group) closeComms() {
	g.abortOnce.Do(func() {
		for _, r := range g.ranks {
			r.comm.Close()
		}
	})
}

func (g *Group) abortCause() error {
	g.abortMu.Lock()
	defer g.abortMu.Unlock()
	return g.aborted
}

// Abort fails the local ranks' pending and later collectives by closing their comms, because of
// cause (which their errors then carry). It is safe to call from another goroutine while a method
// runs: a trainer spanning several hosts calls it when a follower host fails, since the local
// ranks would otherwise wait forever in a collective the lost host's ranks never join. The group
// is unusable afterwards.
func (g *Group) Abort(cause error) {
	g.abortMu.Lock()
	if g.aborted == nil {
		g.aborted = cause
	}
	g.abortMu.Unlock()
	g.closeComms()
}

// Config returns the model configuration.
func (g *Group) Config() gpu.Config { return g.cfg }

// LogProbs runs on the first local rank (with sharded parameters, the others take part in its
// gathers).
func (g *Group) LogProbs(mb *gpu.MicroBatch) (logp, entropy []float32, err error) {
	err = g.onFirst("log-probs", true, false, func(be gpu.Backend) (err error) {
		logp, entropy, err = be.LogProbs(mb)
		return err
	})
	return logp, entropy, err
}

// Forward runs on the first local rank; its gradients join the next Step like any rank's.
func (g *Group) Forward(mb *gpu.MicroBatch) (logp, entropy []float32, err error) {
	err = g.onFirst("forward", true, false, func(be gpu.Backend) (err error) {
		logp, entropy, err = be.Forward(mb)
		return err
	})
	return logp, entropy, err
}

// Backward runs on the first local rank (after its Forward).
func (g *Group) Backward(dlogp []float32) error {
	return g.onFirst("backward", false, true, func(be gpu.Backend) error { return be.Backward(dlogp) })
}

// onFirst runs f on the first local rank; with sharded parameters every other rank runs the
// matching idle pass at the same time, so the gathers meet.
func (g *Group) onFirst(what string, forward, backward bool, f func(gpu.Backend) error) error {
	if err := g.usable(); err != nil {
		return err
	}
	if !g.params {
		return f(g.ranks[0].be)
	}
	if len(g.ranks) != g.world {
		return fmt.Errorf("dp: %s through gpu.Backend with sharded parameters needs every rank in this process", what)
	}
	return g.collective(what, func(i int, r *rank) error {
		if i == 0 {
			return f(r.be)
		}
		return r.be.(gpu.ParamSharder).IdlePass(forward, backward)
	})
}

// Step is the collective optimizer step (see the package doc): reduce-scatter the gradients, the
// global norm by all-reduce, AdamW on every shard with the clip scale, all-gather the weights. It
// returns the pre-clip global gradient norm. A non-finite norm zeroes every rank's gradients,
// leaves the weights unchanged and is returned as an error, as gpu.Backend.Step does.
func (g *Group) Step(opt gpu.Optimizer) (float64, error) {
	if err := g.usable(); err != nil {
		return 0, err
	}
	if err := opt.Validate(); err != nil {
		return 0, fmt.Errorf("dp: %w", err)
	}
	sumsq := make([]float64, len(g.ranks))
	err := g.collective("gradient reduce-scatter", func(i int, r *rank) error {
		full, err := r.sh.GradBuffer()
		if err != nil {
			return err
		}
		if err := r.comm.ReduceScatterSum(full, r.sh.GradShard()); err != nil {
			return err
		}
		ss, err := r.sh.ShardSumSq()
		if err != nil {
			return err
		}
		v := []float64{ss}
		if err := r.comm.AllReduceFloat64(v); err != nil {
			return err
		}
		sumsq[i] = v[0]
		return nil
	})
	if err != nil {
		return 0, err
	}
	norm := math.Sqrt(sumsq[0])
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		if err := g.each(func(_ int, r *rank) error { return r.sh.ZeroGrads() }); err != nil {
			return norm, fmt.Errorf("dp: zero gradients: %w", err)
		}
		return norm, fmt.Errorf("dp: gradient norm %v is not finite; step skipped and gradients zeroed", norm)
	}
	scale := 1.0
	if opt.MaxGradNorm > 0 {
		// torch.nn.utils.clip_grad_norm_, as gpu.Backend.Step.
		scale = min(1, opt.MaxGradNorm/(norm+1e-6))
	}
	err = g.collective("parameter all-gather", func(_ int, r *rank) error {
		if err := r.sh.ShardStep(opt, scale); err != nil {
			return err
		}
		if g.params {
			return nil // every pass gathers what it reads
		}
		own, full := r.sh.ParamShard()
		return r.comm.AllGather(own, full)
	})
	return norm, err
}

// Save writes the consolidated Hugging Face checkpoint (every rank holds the full working
// weights) from the first local rank. Only the process driving global rank 0 writes; others
// return nil, so on several hosts only rank 0's host needs the checkpoint directory for weights.
func (g *Group) Save(dir string, dtype gpu.DType) error {
	if err := g.usable(); err != nil {
		return err
	}
	if g.params {
		return g.withWholeParams("save", func(r *rank) error {
			if r.comm.Rank() == 0 {
				return r.be.Save(dir, dtype)
			}
			return nil
		})
	}
	for _, r := range g.ranks {
		if r.comm.Rank() == 0 {
			return r.be.Save(dir, dtype)
		}
	}
	return nil
}

// Weights returns the first local rank's weights (all ranks hold the same after a step).
func (g *Group) Weights() (*gpu.Weights, error) {
	if err := g.usable(); err != nil {
		return nil, err
	}
	we, ok := g.ranks[0].be.(gpu.WeightExporter)
	if !ok {
		return nil, fmt.Errorf("dp: backend %T does not export weights", g.ranks[0].be)
	}
	if !g.params {
		return we.Weights()
	}
	var w *gpu.Weights
	err := g.withWholeParams("weights", func(r *rank) (err error) {
		if r == g.ranks[0] {
			w, err = we.Weights()
		}
		return err
	})
	return w, err
}

// Close closes every local backend and comm.
func (g *Group) Close() error {
	if g.closed {
		return nil
	}
	g.closed = true
	var errs []error
	for _, r := range g.ranks {
		if err := r.be.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := r.comm.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
