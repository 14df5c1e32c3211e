package batch

import (
	"math/rand/v2"
	"testing"

	"tau2rl/schemas"
	"tau2rl/trainer/advantage"
	"tau2rl/trainer/group"
	"tau2rl/trainer/prefixtree"
)

// BenchmarkBuildTau2 lays out a reference step — 16 groups × 8 episodes × 20 policy calls with
// contexts growing to 16k tokens (schemas.Synthetic) — into sequences: prompt reconstruction,
// advantages, loss data. Reported: original tokens per second.
func BenchmarkBuildTau2(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	o := schemas.DefaultSyntheticOptions()
	o.Calls, o.ContextTokens, o.CompletionTokens, o.ThinkTokens = 20, 16384, 300, 100
	var groups []*group.Group
	for g := 0; g < 16; g++ {
		grp := &group.Group{Key: "airline/x"}
		for e := 0; e < 8; e++ {
			t := schemas.Synthetic(rng, o)
			t.Reward = float64(e % 2)
			grp.Members = append(grp.Members, group.Member{Traj: t})
		}
		groups = append(groups, grp)
	}
	var bt *Batch
	for b.Loop() {
		var err error
		if bt, err = Build(groups, advantage.DefaultConfig(), DefaultConfig(), 0, 0); err != nil {
			b.Fatal(err)
		}
	}
	var orig int64
	for _, s := range bt.Seqs {
		orig += int64(len(s.Tokens))
	}
	b.ReportMetric(float64(orig)/1e6, "Morig_tokens")
	b.ReportMetric(float64(orig)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mtok/s")
	p, err := prefixtree.Pack(bt.Seqs, prefixtree.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(p.TokenRatio(), "tree_token_ratio")
}
