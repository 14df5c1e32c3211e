package prefixtree_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/trainer/loss"
	"tau2rl/trainer/prefixtree"
)

// sharedSeqs builds sequences over the tiny vocabulary with heavy prefix sharing: a common
// "system prompt", per-group prompts, and branching completions, some sequences extending others.
func sharedSeqs(r *rand.Rand, vocab int) []prefixtree.Sequence {
	tok := func() int32 { return int32(3 + r.IntN(vocab-3)) }
	system := []int32{1, tok(), tok(), tok(), tok(), tok()}
	var out []prefixtree.Sequence
	for g := 0; g < 3; g++ {
		prompt := append(append([]int32(nil), system...), tok(), tok())
		for ro := 0; ro < 3; ro++ {
			hist := append([]int32(nil), prompt...)
			for c := 0; c < 2; c++ {
				n := len(hist)
				for k := 0; k < 3+r.IntN(3); k++ {
					hist = append(hist, tok())
				}
				loss := make([]bool, len(hist))
				for k := n; k < len(hist); k++ {
					loss[k] = true
				}
				out = append(out, prefixtree.Sequence{Tokens: append([]int32(nil), hist...), Loss: loss})
				hist = append(hist, tok()) // tool result
			}
		}
	}
	return out
}

// TestTreeLogProbsEqualUnpacked runs the pure-Go reference model over the packed trees and over
// every sequence on its own (gpu.Chain): each token's log-prob and entropy must agree.
func TestTreeLogProbsEqualUnpacked(t *testing.T) {
	cfg := gpu.TinyConfig()
	be, err := cpu.NewRandom(cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	seqs := sharedSeqs(r, cfg.VocabSize)
	p, err := prefixtree.Pack(seqs, prefixtree.Config{MaxTokensPerMB: 48, MBOverheadTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.MicroBatches) < 2 || p.TokenRatio() >= 0.7 {
		t.Fatalf("test batch does not exercise splitting and sharing: %d micro-batches, ratio %.2f", len(p.MicroBatches), p.TokenRatio())
	}
	checked := 0
	for _, mb := range p.MicroBatches {
		// Every node (score mask off) must match the unpacked run...
		all := mb.MicroBatch
		all.Score = nil
		lp, ent, err := be.LogProbs(&all)
		if err != nil {
			t.Fatal(err)
		}
		// ...and the scored run must give the same numbers on the loss nodes it keeps.
		slp, _, err := be.LogProbs(&mb.MicroBatch)
		if err != nil {
			t.Fatal(err)
		}
		for n := range slp {
			if mb.Score[n] && slp[n] != lp[n] {
				t.Fatalf("node %d: scored logp %v, full %v", n, slp[n], lp[n])
			}
		}
		for k, s := range mb.Seqs {
			ref, refEnt, err := be.LogProbs(gpu.Chain(seqs[s].Tokens))
			if err != nil {
				t.Fatal(err)
			}
			// Walk the sequence's path from its leaf: node at depth d is token d.
			for n := mb.SeqEnd[k]; n >= 0; n = mb.Parent[n] {
				d := mb.Positions[n]
				if math.Abs(float64(lp[n]-ref[d])) > 1e-4 || math.Abs(float64(ent[n]-refEnt[d])) > 1e-4 {
					t.Fatalf("seq %d token %d: tree logp %v ent %v, unpacked %v %v", s, d, lp[n], ent[n], ref[d], refEnt[d])
				}
				checked++
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d tokens compared", checked)
	}
}

// TestTreeGradientsEqualUnpacked: one backward pass of the decoupled PPO loss over the packed
// trees accumulates the same parameter gradients as the loss of every sequence computed
// separately (the "gradient restoration" identity: shared nodes sum their references).
func TestTreeGradientsEqualUnpacked(t *testing.T) {
	cfg := gpu.TinyConfig()
	r := rand.New(rand.NewPCG(3, 4))
	seqs := sharedSeqs(r, cfg.VocabSize)
	lseqs := make([]loss.Seq, len(seqs))
	var n int64
	for i, s := range seqs {
		lseqs[i] = loss.Seq{Adv: make([]float32, len(s.Tokens)), Behav: make([]float32, len(s.Tokens))}
		for k, on := range s.Loss {
			if on {
				lseqs[i].Adv[k] = float32(r.NormFloat64())
				lseqs[i].Behav[k] = -4 + 0.3*float32(r.NormFloat64())
				n++
			}
		}
	}
	lc := loss.DefaultConfig()
	grads := func(mbs []*prefixtree.MicroBatch, seqIdx func(mb int) []loss.Seq) (map[string][]float32, float64) {
		be, err := cpu.NewRandom(cfg, 5)
		if err != nil {
			t.Fatal(err)
		}
		var total float64
		for i, mb := range mbs {
			prox, _, err := be.LogProbs(&mb.MicroBatch)
			if err != nil {
				t.Fatal(err)
			}
			// Perturb the proximal log-probs so ratios differ from 1 (some clipped).
			for k := range prox {
				prox[k] += 0.2 * float32(math.Sin(float64(mb.Tokens[k])+float64(mb.Positions[k])))
			}
			lp, ent, err := be.Forward(&mb.MicroBatch)
			if err != nil {
				t.Fatal(err)
			}
			l, d, err := lc.Compute(mb, seqIdx(i), lp, prox, ent, n, nil)
			if err != nil {
				t.Fatal(err)
			}
			total += l
			if err := be.Backward(d); err != nil {
				t.Fatal(err)
			}
		}
		return be.Gradients(), total
	}
	p, err := prefixtree.Pack(seqs, prefixtree.Config{MaxTokensPerMB: 64})
	if err != nil {
		t.Fatal(err)
	}
	treeG, treeL := grads(p.MicroBatches, func(int) []loss.Seq { return lseqs })
	var single []*prefixtree.MicroBatch
	for _, s := range seqs {
		q, err := prefixtree.Pack([]prefixtree.Sequence{s}, prefixtree.Config{MaxTokensPerMB: 64})
		if err != nil {
			t.Fatal(err)
		}
		single = append(single, q.MicroBatches[0])
	}
	flatG, flatL := grads(single, func(i int) []loss.Seq { return []loss.Seq{lseqs[i]} })
	if math.Abs(treeL-flatL) > 1e-5*max(1, math.Abs(flatL)) {
		t.Fatalf("loss: tree %v, unpacked %v", treeL, flatL)
	}
	var norm float64
	for name, g := range flatG {
		tg := treeG[name]
		for i := range g {
			diff := float64(tg[i] - g[i])
			norm += float64(g[i]) * float64(g[i])
			if math.Abs(diff) > 1e-4+1e-3*math.Abs(float64(g[i])) {
				t.Fatalf("%s[%d]: tree grad %v, unpacked %v", name, i, tg[i], g[i])
			}
		}
	}
	if norm == 0 {
		t.Fatal("zero gradient: the test checks nothing")
	}
}

// TestLossFallsOnFixedBatch trains the tiny model on one fixed batch against a fixed proximal
// (= behaviour) policy: the PPO surrogate must fall, the positive-advantage completions must get
// likelier and the negative ones less likely.
func TestLossFallsOnFixedBatch(t *testing.T) {
	cfg := gpu.TinyConfig()
	be, err := cpu.NewRandom(cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	seqs := sharedSeqs(r, cfg.VocabSize)
	p, err := prefixtree.Pack(seqs, prefixtree.Config{MaxTokensPerMB: 256})
	if err != nil {
		t.Fatal(err)
	}
	mb := p.MicroBatches[0]
	prox, _, err := be.LogProbs(&mb.MicroBatch)
	if err != nil {
		t.Fatal(err)
	}
	lseqs := make([]loss.Seq, len(seqs))
	for i, s := range seqs {
		adv := float32(1)
		if i%2 == 1 {
			adv = -1
		}
		lseqs[i] = loss.Seq{Adv: make([]float32, len(s.Tokens)), Behav: make([]float32, len(s.Tokens))}
		for k := range s.Tokens {
			lseqs[i].Adv[k] = adv
		}
	}
	// Behaviour = proximal = the initial model, per node.
	for c := range mb.Tokens {
		for ref := mb.RefStart[c]; ref < mb.RefStart[c+1]; ref++ {
			lseqs[mb.RefSeq[ref]].Behav[mb.RefTok[ref]] = prox[c]
		}
	}
	lc := loss.Config{EpsClip: 0.4, BehavImpWeightCap: 5}
	opt := gpu.DefaultOptimizer()
	opt.LR = 3e-3
	opt.WeightDecay = 0
	var first, last float64
	for it := 0; it < 8; it++ {
		lp, ent, err := be.Forward(&mb.MicroBatch)
		if err != nil {
			t.Fatal(err)
		}
		l, d, err := lc.Compute(mb, lseqs, lp, prox, ent, p.LossTokens, nil)
		if err != nil {
			t.Fatal(err)
		}
		if it == 0 {
			first = l
		}
		last = l
		if err := be.Backward(d); err != nil {
			t.Fatal(err)
		}
		if _, err := be.Step(opt); err != nil {
			t.Fatal(err)
		}
	}
	if !(last < first-0.05) {
		t.Fatalf("loss did not fall: first %v last %v", first, last)
	}
	lp, _, err := be.LogProbs(&mb.MicroBatch)
	if err != nil {
		t.Fatal(err)
	}
	var up, down float64
	for c := range mb.Tokens {
		for ref := mb.RefStart[c]; ref < mb.RefStart[c+1]; ref++ {
			delta := float64(lp[c] - prox[c])
			if lseqs[mb.RefSeq[ref]].Adv[mb.RefTok[ref]] > 0 {
				up += delta
			} else {
				down += delta
			}
		}
	}
	if !(up > 0 && down < 0) {
		t.Fatalf("log-prob change: positive-advantage tokens %+.3f, negative %+.3f", up, down)
	}
	t.Logf("surrogate loss %.4f → %.4f", first, last)
}
