package dp

import (
	"fmt"

	"tau2rl/gpu"
)

// Parameter sharding (Options.ShardParameters, ZeRO-3): the working weights of a unit (a decoder
// layer, the embedding, the final norm and head) are gathered whole right before a pass reads them
// and released after, so persistent working weights are the rank's shard only. The gather is a
// broadcast from each owner of a piece of the unit's flat range (a unit straddles shard
// boundaries); every rank issues the same broadcasts in the same order, which is why ranks with
// fewer micro-batches than others run idle passes (gpu.ParamSharder.IdlePass) in the rounds they
// have no work.

// shardParams checks every backend can shard its weights and installs the gathers.
func (g *Group) shardParams() error {
	specs := gpu.ParamSpecs(g.cfg)
	for _, u := range gpu.ParamUnits(g.cfg) {
		last := u[1] - 1
		g.units = append(g.units, [2]int{g.layout.Offsets[u[0]], g.layout.Offsets[last] + specs[last].Size()})
	}
	for _, r := range g.ranks {
		if _, ok := r.be.(gpu.ParamSharder); !ok {
			return fmt.Errorf("dp: backend %T cannot shard its parameters (it does not implement gpu.ParamSharder)", r.be)
		}
	}
	g.params = true
	err := g.each(func(_ int, r *rank) error { return r.be.(gpu.ParamSharder).ShardParams(g.gatherer(r)) })
	if err != nil {
		return fmt.Errorf("dp: shard parameters: %w", err)
	}
	return nil
}

// gatherer is rank r's gather of a unit: one broadcast per owner of a piece of the unit's range.
func (g *Group) gatherer(r *rank) func(unit int) error {
	return func(unit int) error {
		_, full := r.sh.ParamShard()
		a, b := g.units[unit][0], g.units[unit][1]
		n := r.shard.Len
		for k := a / n; k*n < b; k++ {
			if err := r.comm.Broadcast(full.Slice(max(a, k*n), min(b, (k+1)*n)), k); err != nil {
				return err
			}
		}
		return nil
	}
}

// withWholeParams gathers every unit on every local rank, runs f on each, and releases again.
func (g *Group) withWholeParams(what string, f func(r *rank) error) error {
	if len(g.ranks) != g.world {
		return fmt.Errorf("dp: %s with sharded parameters needs every rank in this process", what)
	}
	return g.collective(what, func(_ int, r *rank) error {
		gather := g.gatherer(r)
		for u := range g.units {
			if err := gather(u); err != nil {
				return err
			}
		}
		if err := f(r); err != nil {
			return err
		}
		return r.be.(gpu.ParamSharder).ReleaseParams()
	})
}

// rounds is the most micro-batches any rank has: the number of rounds every rank takes part in.
func rounds(a Assignment) int {
	n := 0
	for _, idx := range a {
		n = max(n, len(idx))
	}
	return n
}
