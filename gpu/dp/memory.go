package dp

import (
	"fmt"
	"io"
	"strings"

	"tau2rl/gpu"
)

// Level is a sharding level of the per-rank memory model.
type Level int

const (
	// Replicated: every rank holds everything (a one-GPU backend, or data parallelism with an
	// all-reduce of gradients): the baseline.
	Replicated Level = iota
	// ShardOptimizer: what Group does: the fp32 master weights and both AdamW moments are
	// sharded; the working weights and the gradient accumulator are whole on every rank (the
	// reduced gradient exists only as shards: reduce-scatter, in place).
	ShardOptimizer
	// ShardParameters: working weights and gradients sharded too (ZeRO-3 / FSDP: each unit's
	// weights gathered ahead of use, its gradients reduce-scattered after its backward), with two
	// units' weights and gradients whole at a time. Group's Options.ShardParameters runs this
	// schedule for the weights on gpu/cpu (which keeps its buffers allocated: the schedule, not
	// the memory). A Group of gpu/cuda backends refuses it, and gradients are reduce-scattered
	// per step rather than per unit, so for CUDA this level is the memory model of that design,
	// not what runs today (docs/MULTIGPU.md).
	ShardParameters
)

func (l Level) String() string {
	switch l {
	case Replicated:
		return "replicated"
	case ShardOptimizer:
		return "optimizer"
	case ShardParameters:
		return "parameters"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// Component is one buffer of the memory model, in bytes per parameter element.
type Component struct {
	Name    string
	Bytes   int  // bytes per element
	Sharded bool // divided by the world size at this level
}

// Memory is the per-rank memory of the parameter, gradient and optimizer-state buffers
// (activations, the cuBLAS workspace and the CUDA context excluded).
type Memory struct {
	Backend    string // "cuda" or "cpu"
	Level      Level
	World      int
	Elements   int64 // flat elements (the layout, before shard padding)
	Components []Component
	// Transient is the extra bytes of whole layers a ShardParameters rank gathers at a time.
	Transient int64
	// Bytes is this rank's total for the buffers, shard padding included.
	Bytes int64
}

// BytesPerParam is Bytes over Elements.
func (m Memory) BytesPerParam() float64 { return float64(m.Bytes) / float64(m.Elements) }

// components lists a backend's per-element buffers: gpu/cuda keeps bf16 working weights next to
// the fp32 masters; gpu/cpu computes in fp32, so its parameters are both.
func components(backend string, level Level) ([]Component, error) {
	opt := level >= ShardOptimizer
	all := level >= ShardParameters
	switch backend {
	case "cuda":
		return []Component{
			{"bf16 working weights", 2, all}, {"fp32 gradient accumulator", 4, all},
			{"fp32 master weights", 4, opt}, {"AdamW exp_avg", 4, opt}, {"AdamW exp_avg_sq", 4, opt},
		}, nil
	case "cpu":
		return []Component{
			{"fp32 weights (working and master)", 4, all}, {"fp32 gradient accumulator", 4, all},
			{"AdamW exp_avg", 4, opt}, {"AdamW exp_avg_sq", 4, opt},
		}, nil
	}
	return nil, fmt.Errorf("dp: memory model for backend %q: want cuda or cpu", backend)
}

// MemoryModel is the per-rank memory of a model whose flat layout holds `elements` elements, on
// `world` ranks of `backend` at `level`. Shards are padded like gpu.ShardBounds (64-element
// alignment for cuda), so for ShardOptimizer it is exactly what a Group's backends allocate.
func MemoryModel(cfg gpu.Config, elements int64, backend string, world int, level Level) (Memory, error) {
	comps, err := components(backend, level)
	if err != nil {
		return Memory{}, err
	}
	if world < 1 {
		return Memory{}, fmt.Errorf("dp: memory model for world size %d", world)
	}
	align := 1
	if backend == "cuda" {
		align = 64
	}
	m := Memory{Backend: backend, Level: level, World: world, Elements: elements, Components: comps}
	whole, shard := elements, elements
	if level != Replicated {
		s, _ := gpu.ShardBounds(int(elements), world, 0, align)
		whole, shard = int64(s.Len)*int64(world), int64(s.Len)
	}
	for _, c := range comps {
		n := whole
		if c.Sharded {
			n = shard
		}
		m.Bytes += int64(c.Bytes) * n
	}
	if level == ShardParameters {
		// Two units whole at a time (the one computing and the one being gathered), weights and
		// gradients; the largest unit is a layer or the embedding table.
		per := 0
		for _, c := range comps[:2] {
			per += c.Bytes
		}
		m.Transient = 2 * int64(per) * layerElements(cfg)
		m.Bytes += m.Transient
	}
	return m, nil
}

// layerElements is the largest unit parameter sharding gathers whole: a decoder layer or the
// embedding table (which the LM head shares when tied).
func layerElements(cfg gpu.Config) int64 {
	H, I, Q, KV := cfg.HiddenSize, cfg.IntermediateSize, cfg.QDim(), cfg.KVDim()
	return max(int64(2*H+H*(Q+2*KV)+2*cfg.HeadDim+Q*H+3*H*I), int64(cfg.VocabSize)*int64(H))
}

// WriteMemoryTable prints the memory model of cfg for each world size and level, in GiB per rank
// and bytes per parameter (cmd/tau2-trainer -memory prints it; docs/MULTIGPU.md quotes it).
func WriteMemoryTable(w io.Writer, name string, cfg gpu.Config, backend string, worlds []int) error {
	n := cfg.NumParams()
	fmt.Fprintf(w, "%s: %.3g parameters, backend %s; per rank, activations excluded\n", name, float64(n), backend)
	fmt.Fprintf(w, "%-6s %-11s %12s %10s  %s\n", "ranks", "sharding", "GiB/rank", "B/param", "components (B/param, ÷ranks when sharded)")
	for _, world := range worlds {
		for _, lvl := range []Level{Replicated, ShardOptimizer, ShardParameters} {
			if world == 1 && lvl != Replicated {
				continue
			}
			m, err := MemoryModel(cfg, n, backend, world, lvl)
			if err != nil {
				return err
			}
			var parts []string
			for _, c := range m.Components {
				s := fmt.Sprintf("%s %d", c.Name, c.Bytes)
				if c.Sharded {
					s += "÷" + fmt.Sprint(world)
				}
				parts = append(parts, s)
			}
			if m.Transient > 0 {
				parts = append(parts, fmt.Sprintf("+ %.2f GiB for two whole units (layers or embedding)", float64(m.Transient)/(1<<30)))
			}
			if _, err := fmt.Fprintf(w, "%-6d %-11s %12.2f %10.2f  %s\n", world, lvl, float64(m.Bytes)/(1<<30), m.BytesPerParam(), strings.Join(parts, ", ")); err != nil {
				return err
			}
		}
	}
	return nil
}
