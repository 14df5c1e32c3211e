package loss

import (
	"math/rand/v2"
	"testing"

	"tau2rl/trainer/prefixtree"
)

// BenchmarkCompute measures the loss and its gradient over a 24k-node micro-batch whose nodes
// carry 8 references each on average in their completion half (a branching group). Reported:
// references per second.
func BenchmarkCompute(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const n, refsPer = 24576, 8
	var seqs []prefixtree.Sequence
	prompt := make([]int32, n/2)
	for i := range prompt {
		prompt[i] = int32(r.IntN(1000))
	}
	for s := 0; s < refsPer; s++ {
		toks := append(append([]int32(nil), prompt...), int32(1000+s))
		for len(toks) < n/2+n/(2*refsPer) {
			toks = append(toks, int32(r.IntN(1000)))
		}
		loss := make([]bool, len(toks))
		for i := len(prompt); i < len(toks); i++ {
			loss[i] = true
		}
		seqs = append(seqs, prefixtree.Sequence{Tokens: toks, Loss: loss})
	}
	p, err := prefixtree.Pack(seqs, prefixtree.Config{MaxTokensPerMB: 2 * n})
	if err != nil {
		b.Fatal(err)
	}
	mb := p.MicroBatches[0]
	ls := make([]Seq, len(seqs))
	for i, s := range seqs {
		ls[i] = Seq{Adv: make([]float32, len(s.Tokens)), Behav: make([]float32, len(s.Tokens))}
		for k := range s.Tokens {
			ls[i].Adv[k], ls[i].Behav[k] = float32(r.NormFloat64()), -1
		}
	}
	logp, prox := make([]float32, mb.Len()), make([]float32, mb.Len())
	for i := range logp {
		prox[i] = -1 - float32(r.Float64())
		logp[i] = prox[i] + 0.1*float32(r.NormFloat64())
	}
	cfg := DefaultConfig()
	for b.Loop() {
		if _, _, err := cfg.Compute(mb, ls, logp, prox, nil, p.LossTokens, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(p.LossTokens)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrefs/s")
}
