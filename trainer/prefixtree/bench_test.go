package prefixtree

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkPackTau2 packs the reference batch: 16 groups × 8 rollouts × 20 policy calls,
// 2k-token shared system prompt, up to 16k tokens of context, into 24k-token micro-batches.
// Reported: tree_token_ratio (packed/original), distinct/original, micro-batches, and original
// tokens packed per second.
func BenchmarkPackTau2(b *testing.B) {
	seqs := tau2Batch(rand.New(rand.NewPCG(7, 7)), tau2Shape{Groups: 16, Rollouts: 8, Calls: 20, SystemTokens: 2048, MaxContext: 16384})
	cfg := DefaultConfig()
	var p *Packing
	b.ResetTimer()
	for b.Loop() {
		var err error
		if p, err = Pack(seqs, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(p.TokenRatio(), "tree_token_ratio")
	b.ReportMetric(float64(p.DistinctTokens)/float64(p.OriginalTokens), "distinct_ratio")
	b.ReportMetric(float64(len(p.MicroBatches)), "microbatches")
	b.ReportMetric(float64(len(seqs)), "sequences")
	b.ReportMetric(float64(p.OriginalTokens)/1e6, "Morig_tokens")
	b.ReportMetric(float64(p.OriginalTokens)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtok/s")
}

// BenchmarkTreeInsert measures trie construction alone on the same batch.
func BenchmarkTreeInsert(b *testing.B) {
	seqs := tau2Batch(rand.New(rand.NewPCG(7, 7)), tau2Shape{Groups: 16, Rollouts: 8, Calls: 20, SystemTokens: 2048, MaxContext: 16384})
	var orig int64
	for _, s := range seqs {
		orig += int64(len(s.Tokens))
	}
	b.ResetTimer()
	for b.Loop() {
		var t Tree
		for _, s := range seqs {
			if _, err := t.Insert(s.Tokens); err != nil {
				b.Fatal(err)
			}
		}
		_ = t.Walk()
	}
	b.ReportMetric(float64(orig)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtok/s")
}
