package gpu

import (
	"fmt"

	"tau2rl/gpu/collective"
)

// Sharder is implemented by backends that can be one rank of the ZeRO-style data-parallel trainer
// (gpu/dp). It is optional (gpu/dp type-asserts, as the trainer does for OptimizerStateSaver):
// gpu/cpu and gpu/cuda implement it.
//
// The backend keeps its parameters and gradients in one flat buffer each (FlatLayout: tensors in
// ParamSpecs order at backend-chosen offsets, padded so the buffer splits into World equal shards
// of Len elements). After Shard, a rank owns shard Rank, [Lo, Lo+Len): it keeps the AdamW state
// (fp32 master weights, first and second moments) for that range only — the ZeRO optimizer-state
// sharding that divides 12 of the 18 bytes per parameter by World — while every rank keeps the
// full working weights for its forward and backward passes and its own full gradient accumulator.
// One optimizer step is then, driven by gpu/dp:
//
//	reduce-scatter GradBuffer → GradShard    (each rank receives the summed gradient of its shard)
//	ShardSumSq, all-reduce                   (the global gradient norm, for clipping)
//	ShardStep(opt, clip scale)               (AdamW on the shard; own block of the working weights refreshed)
//	all-gather ParamShard                    (every rank's working weights updated)
//
// The plain Step and the unsharded optimizer-state file are refused on a sharded backend; gpu/dp
// saves the sharded state (ShardState) instead.
type Sharder interface {
	// FlatLayout describes the flat parameter buffer (the same for every rank of a world).
	FlatLayout() FlatLayout
	// Shard makes the backend rank `rank` of `world`, keeping the optimizer state of its shard
	// (moments already accumulated are kept for that range). It is called once, before training;
	// a backend built as that rank already (cuda.NewShard, which never holds the whole optimizer
	// state) returns its shard unchanged.
	Shard(rank, world int) (Shard, error)
	// GradBuffer is the full flat fp32 gradient accumulated by Backward since the last step (all
	// zeros on a rank that ran none: a backend that left the last step's values in place, as
	// gpu/cuda's ShardStep does, zeroes them here).
	GradBuffer() (collective.Buffer, error)
	// GradShard is the fp32 buffer of Shard.Len elements the reduce-scatter writes into.
	GradShard() collective.Buffer
	// ParamShard returns the all-gather of the working weights: this rank's block (own) of the
	// full working-weight buffer (full); F32 on gpu/cpu, BF16 on gpu/cuda.
	ParamShard() (own, full collective.Buffer)
	// ShardSumSq is Σ g² over GradShard (float64 accumulation).
	ShardSumSq() (float64, error)
	// ShardStep applies one AdamW step (torch.optim.AdamW, as Step) to the shard with the gradient
	// GradShard·gradScale, writes the updated weights into its block of the working weights, and
	// leaves GradBuffer standing for zero: gpu/cpu zeroes it; gpu/cuda leaves the values for the
	// next Backward to overwrite (or GradBuffer to zero), as its Step does.
	ShardStep(opt Optimizer, gradScale float64) error
	// ZeroGrads zeroes GradBuffer and drops the last Forward (a skipped step).
	ZeroGrads() error
	// ShardState copies the shard's optimizer state to the host (checkpoints).
	ShardState() (ShardState, error)
	// SetShardState replaces the shard's optimizer state (and its block of the working weights,
	// from Master); the caller all-gathers the working weights afterwards.
	SetShardState(ShardState) error
}

// FlatLayout is a backend's flat parameter layout: Offsets[i] is the element offset of
// ParamSpecs(cfg)[i] and Len the end of the last tensor (before the shard padding). Kind names the
// layout rule ("dense" for gpu/cpu, "align64" for gpu/cuda): sharded optimizer state written
// under one rule is read back only under the same rule.
type FlatLayout struct {
	Kind    string
	Offsets []int
	Len     int
}

// Shard is one rank's share of the flat buffers: elements [Lo, Lo+Len) of World·Len.
type Shard struct {
	Rank, World int
	Lo, Len     int
}

// ShardState is a shard's AdamW state: fp32 master weights and moments (Shard.Len each) and the
// number of steps taken (bias correction).
type ShardState struct {
	Master, ExpAvg, ExpAvgSq []float32
	Step                     int
}

// ShardBounds splits n elements into world shards whose length is a multiple of align: shard r is
// [r·len, (r+1)·len) of a buffer padded to world·len.
func ShardBounds(n, world, rank, align int) (Shard, error) {
	if world < 1 || rank < 0 || rank >= world {
		return Shard{}, fmt.Errorf("gpu: rank %d of world %d", rank, world)
	}
	if align < 1 {
		align = 1
	}
	per := (n + world - 1) / world
	per = (per + align - 1) / align * align
	return Shard{Rank: rank, World: world, Lo: rank * per, Len: per}, nil
}

// ParamSharder is a Sharder that can also shard its working weights (ZeRO-3): after ShardParams
// a rank keeps the working weights of its own shard only, and gathers a unit's weights whole
// (gather, a collective gpu/dp supplies) right before it reads them in a forward or backward pass,
// releasing them right after. Units are ParamUnits. Every rank must issue the same gathers in the
// same order, so a rank with no micro-batch left in a round runs IdlePass instead: the gathers of
// a pass without its compute.
type ParamSharder interface {
	Sharder
	// ShardParams installs gather and releases every working weight outside the shard.
	ShardParams(gather func(unit int) error) error
	// ReleaseParams releases every working weight outside the shard (after a whole-model gather
	// for a save).
	ReleaseParams() error
	// IdlePass issues the gathers of a forward pass and/or a backward pass, computing nothing.
	IdlePass(forward, backward bool) error
}

// ParamUnits groups ParamSpecs(cfg) (by index) into the units parameter sharding gathers whole:
// unit 0 the embedding table, unit 1+l decoder layer l, the last unit the final norm (and the LM
// head when it is not tied to the embedding).
func ParamUnits(cfg Config) [][2]int {
	specs := ParamSpecs(cfg)
	units := [][2]int{{0, 1}}
	per := len(LayerTensors)
	for l := range cfg.NumHiddenLayers {
		units = append(units, [2]int{1 + l*per, 1 + (l+1)*per})
	}
	return append(units, [2]int{1 + cfg.NumHiddenLayers*per, len(specs)})
}
