package dp

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"tau2rl/gpu"
)

// Cost is the work of one micro-batch in FLOPs of forward plus backward, the quantity Assign
// balances across ranks:
//
//	6·P_layers·tokens            the layers' weight GEMMs (2 forward, 4 backward per weight and token)
//	12·L·q_dim·visible pairs     tree attention: QKᵀ and PV forward (4 per pair and q-dim), 8 backward
//	6·H·V·scored tokens          the LM head, which only scored (loss) nodes need
//
// A micro-batch's visible pairs are Σ_j (SubtreeEnd[j] − j + 1), the keys each query sees under the
// prefix-tree mask: a deep shared prefix costs attention quadratically where tokens count it once.
func Cost(cfg gpu.Config, mb *gpu.MicroBatch) float64 {
	H, I, Q, KV, L := cfg.HiddenSize, cfg.IntermediateSize, cfg.QDim(), cfg.KVDim(), cfg.NumHiddenLayers
	perLayer := float64(H*(Q+2*KV) + Q*H + 3*H*I)
	var pairs, scored float64
	for j := range mb.Tokens {
		pairs += float64(int(mb.SubtreeEnd[j]) - j + 1)
		if mb.Scored(j) && mb.Parent[j] >= 0 {
			scored++
		}
	}
	n := float64(len(mb.Tokens))
	return 6*perLayer*float64(L)*n + 12*float64(L*Q)*pairs + 6*float64(H*cfg.VocabSize)*scored
}

// Assignment lists, per global rank, the indices of the micro-batches it runs, ascending.
type Assignment [][]int

// Assign spreads micro-batches over world ranks so that their Cost sums are balanced: longest
// processing time first (the most expensive micro-batch goes to the least-loaded rank; ties to the
// lower rank), which is within 4/3 of the best makespan. It is a pure function of the micro-batches,
// so every host computes the same assignment. Ranks may get different counts, or none.
func Assign(cfg gpu.Config, mbs []*gpu.MicroBatch, world int) Assignment {
	type item struct {
		i    int
		cost float64
	}
	items := make([]item, len(mbs))
	for i, mb := range mbs {
		items[i] = item{i, Cost(cfg, mb)}
	}
	slices.SortStableFunc(items, func(a, b item) int {
		switch {
		case a.cost > b.cost:
			return -1
		case a.cost < b.cost:
			return 1
		}
		return a.i - b.i
	})
	out := make(Assignment, world)
	load := make([]float64, world)
	for _, it := range items {
		best := 0
		for r := 1; r < world; r++ {
			if load[r] < load[best] {
				best = r
			}
		}
		load[best] += it.cost
		out[best] = append(out[best], it.i)
	}
	for r := range out {
		slices.Sort(out[r])
	}
	return out
}

// Assign is Assign for this group's model and world.
func (g *Group) Assign(mbs []*gpu.MicroBatch) Assignment { return Assign(g.cfg, mbs, g.world) }

func (g *Group) checkAssignment(mbs []*gpu.MicroBatch, a Assignment) error {
	if len(a) != g.world {
		return fmt.Errorf("dp: assignment for %d ranks, world is %d", len(a), g.world)
	}
	seen := make([]bool, len(mbs))
	for r, idx := range a {
		for _, i := range idx {
			if i < 0 || i >= len(mbs) || seen[i] {
				return fmt.Errorf("dp: rank %d assigned micro-batch %d twice or out of range [0,%d)", r, i, len(mbs))
			}
			seen[i] = true
		}
	}
	for i, ok := range seen {
		if !ok {
			return fmt.Errorf("dp: micro-batch %d is assigned to no rank", i)
		}
	}
	return nil
}

// LogProbsParallel computes log-probs (no activations kept) of every micro-batch assigned to a
// local rank, each rank running its own concurrently. Entries of micro-batches other hosts run are
// nil. With the same assignment, ForwardBackwardParallel runs each micro-batch on the rank that
// computed its log-probs here.
func (g *Group) LogProbsParallel(mbs []*gpu.MicroBatch, a Assignment) ([][]float32, error) {
	if err := g.usable(); err != nil {
		return nil, err
	}
	if err := g.checkAssignment(mbs, a); err != nil {
		return nil, err
	}
	out := make([][]float32, len(mbs))
	run := func(_ int, r *rank) error {
		idx := a[r.comm.Rank()]
		for s := range max(len(idx), g.rounds(a)) {
			if s >= len(idx) {
				if err := r.be.(gpu.ParamSharder).IdlePass(true, false); err != nil {
					return err
				}
				continue
			}
			i := idx[s]
			lp, _, err := r.be.LogProbs(mbs[i])
			if err != nil {
				return fmt.Errorf("log-probs of micro-batch %d: %w", i, err)
			}
			out[i] = lp // distinct i per rank: no two goroutines write the same entry
		}
		return nil
	}
	if g.params {
		return out, g.collective("log-probs", run)
	}
	return out, g.each(run)
}

// rounds is how many micro-batch rounds every rank takes part in: with sharded parameters the
// most any rank has (ranks with fewer run idle passes, so the gathers meet); otherwise 0 (each
// rank runs only its own).
func (g *Group) rounds(a Assignment) int {
	if !g.params {
		return 0
	}
	return rounds(a)
}

// LossFunc turns one micro-batch's log-probs and entropies into dlogp for Backward. It is called
// concurrently from the local ranks' goroutines (each rank calls it for its micro-batches in
// ascending order), so it must only write state owned by the rank or the micro-batch.
type LossFunc func(rank, i int, logp, entropy []float32) (dlogp []float32, err error)

// ForwardBackwardParallel runs forward, loss and backward of every micro-batch assigned to a local
// rank, accumulating into that rank's gradients; the next Step reduces them. On an error the local
// ranks' gradients are zeroed (a partial step must not be applied) and the error returned.
func (g *Group) ForwardBackwardParallel(mbs []*gpu.MicroBatch, a Assignment, loss LossFunc) error {
	if err := g.usable(); err != nil {
		return err
	}
	if err := g.checkAssignment(mbs, a); err != nil {
		return err
	}
	var failed sync.Once
	stop := make(chan struct{})
	run := func(_ int, r *rank) error {
		rk := r.comm.Rank()
		idx := a[rk]
		for s := range max(len(idx), g.rounds(a)) {
			if s >= len(idx) {
				if err := r.be.(gpu.ParamSharder).IdlePass(true, true); err != nil {
					return err
				}
				continue
			}
			i := idx[s]
			select {
			case <-stop:
				return errStopped
			default:
			}
			lp, ent, err := r.be.Forward(mbs[i])
			if err == nil {
				var dl []float32
				if dl, err = loss(rk, i, lp, ent); err == nil {
					err = r.be.Backward(dl)
				}
			}
			if err != nil {
				failed.Do(func() { close(stop) })
				return fmt.Errorf("micro-batch %d: %w", i, err)
			}
		}
		return nil
	}
	var err error
	if g.params {
		err = g.collective("forward/backward", run) // a failed rank must not leave the others in a gather
	} else {
		err = g.each(run)
	}
	if err != nil {
		for _, r := range g.ranks {
			r.sh.ZeroGrads()
		}
		return err
	}
	return nil
}

var errStopped = errors.New("stopped: another rank failed")
