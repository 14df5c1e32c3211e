package step

import (
	"fmt"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/dp"
	"tau2rl/trainer/loss"
	"tau2rl/trainer/prefixtree"
)

// updateParallel is update on a data-parallel backend (gpu/dp): each minibatch's micro-batches
// are spread over the ranks by cost (dp.Assign: tokens and visible attention pairs), every rank
// runs forward, loss and backward of its share concurrently, and one collective optimizer step
// follows. The loss normaliser is still the minibatch's global loss-token count and the
// gradients add up over ranks as over micro-batches, so the step is the function update computes
// on one GPU. Proximal log-probs are computed by the rank that later trains the micro-batch, with
// the same assignment. Loss statistics are kept per rank and merged in rank order.
func (t *Trainer) updateParallel(g *dp.Group, p *prefixtree.Packing, seqs []loss.Seq) (loss.Stats, float64, error) {
	obj, err := loss.New(t.cfg.Actor.Config)
	if err != nil {
		return loss.Stats{}, 0, err
	}
	mbs := p.MicroBatches
	n := t.cfg.Actor.PPONMinibatches
	type minibatch struct {
		lo, hi int
		gpu    []*gpu.MicroBatch
		assign dp.Assignment
		tokens int64
		prox   [][]float32
	}
	parts := make([]minibatch, n)
	for k := range parts {
		lo, hi := k*len(mbs)/n, (k+1)*len(mbs)/n
		mb := minibatch{lo: lo, hi: hi}
		for i := lo; i < hi; i++ {
			mb.gpu = append(mb.gpu, &mbs[i].MicroBatch)
			mb.tokens += int64(len(mbs[i].RefSeq))
		}
		mb.assign = g.Assign(mb.gpu)
		parts[k] = mb
	}
	if t.cfg.Actor.RecomputeLogprob {
		t0 := time.Now()
		for k := range parts {
			prox, err := g.LogProbsParallel(parts[k].gpu, parts[k].assign)
			if err != nil {
				return loss.Stats{}, 0, fmt.Errorf("proximal log-probs: %w", err)
			}
			parts[k].prox = prox
		}
		t.phase("prox", t0)
	}
	t0 := time.Now()
	var stats loss.Stats
	var gradNorm float64
	for _, part := range parts {
		if part.tokens == 0 {
			continue
		}
		perRank := make([]loss.Stats, g.World())
		err := g.ForwardBackwardParallel(part.gpu, part.assign, func(rank, i int, logp, ent []float32) ([]float32, error) {
			px := logp // recompute_logprob off: the proximal policy is the current one (detached)
			if part.prox != nil {
				px = part.prox[i]
			}
			res, err := loss.Evaluate(obj, loss.Input{MB: mbs[part.lo+i], Seqs: seqs, Logp: logp, Prox: px, Entropy: ent, N: part.tokens})
			if err != nil {
				return nil, fmt.Errorf("loss: %w", err)
			}
			perRank[rank].Add(res.Stats)
			return res.DLogp, nil
		})
		if err != nil {
			return stats, 0, fmt.Errorf("forward/backward: %w", err)
		}
		for _, s := range perRank {
			stats.Add(s)
		}
		gn, err := g.Step(t.optimizer())
		if err != nil {
			return stats, 0, fmt.Errorf("optimizer step: %w", err)
		}
		gradNorm = gn
	}
	t.phase("train", t0)
	return stats, gradNorm, nil
}
