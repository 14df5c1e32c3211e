package loss

import (
	"fmt"
	"math"

	"tau2rl/trainer/prefixtree"
)

// NLL is the supervised (SFT) objective over one packed micro-batch: the mean negative
// log-likelihood of the loss tokens,
//
//	loss = −Σ_r logp[node(r)] / N        N = loss tokens of the whole (mini)batch
//
// and its gradient per node, −refs(node)/N: a node shared by k sequences' loss tokens (the same
// token in the same context) counts k times, which equals training every sequence separately,
// while the prefix tree computes it once. It returns the micro-batch's share of the loss and the
// number of references it scored.
func NLL(mb *prefixtree.MicroBatch, logp []float32, n int64) (float64, []float32, int64, error) {
	nodes := mb.Len()
	if len(logp) != nodes {
		return 0, nil, 0, fmt.Errorf("loss: nll: %d nodes but %d logp", nodes, len(logp))
	}
	if len(mb.RefStart) != nodes+1 {
		return 0, nil, 0, fmt.Errorf("loss: nll: micro-batch has %d reference starts for %d nodes", len(mb.RefStart), nodes)
	}
	if n <= 0 {
		return 0, nil, 0, fmt.Errorf("loss: nll: normaliser must be > 0, got %d", n)
	}
	inv := 1 / float64(n)
	dlogp := make([]float32, nodes)
	var total float64
	var refs int64
	for node := 0; node < nodes; node++ {
		k := mb.RefStart[node+1] - mb.RefStart[node]
		if k == 0 {
			continue
		}
		lp := float64(logp[node])
		if math.IsNaN(lp) || math.IsInf(lp, 0) {
			return 0, nil, 0, fmt.Errorf("loss: nll: node %d: log-prob %v", node, lp)
		}
		total -= float64(k) * lp * inv
		dlogp[node] = float32(-float64(k) * inv)
		refs += int64(k)
	}
	return total, dlogp, refs, nil
}
