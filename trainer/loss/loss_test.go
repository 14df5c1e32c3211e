package loss

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"tau2rl/trainer/prefixtree"
)

// oneNode builds a micro-batch of two nodes (root, scored token) whose token 1 is a loss token of
// each of k sequences.
func oneNode(k int) *prefixtree.MicroBatch {
	var seqs []prefixtree.Sequence
	for i := 0; i < k; i++ {
		seqs = append(seqs, prefixtree.Sequence{Tokens: []int32{1, 2}, Loss: []bool{false, true}})
	}
	p, err := prefixtree.Pack(seqs, prefixtree.Config{MaxTokensPerMB: 8})
	if err != nil {
		panic(err)
	}
	return p.MicroBatches[0]
}

func TestComputeHand(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	cases := []struct {
		name                   string
		logp, prox, behav, adv float64
		n                      int64
		loss, grad             float64
		clip, capped           int64
	}{
		// On-policy first minibatch: ratio 1, w 1 → loss −A/N, grad −A/N.
		{name: "on policy", logp: -1, prox: -1, behav: -1, adv: 2, n: 4, loss: -0.5, grad: -0.5},
		// ratio 1.2 inside [0.6, 1.4]: pg = −A·1.2; w = e^{prox−behav} = 2.
		{name: "inside clip", logp: float64(ln(0.6)), prox: float64(ln(0.5)), behav: float64(ln(0.25)), adv: 1, n: 1, loss: -1.2 * 2, grad: -1.2 * 2},
		// ratio 2 > 1.4 with A > 0: the clipped branch −A·1.4 is larger; no gradient.
		{name: "clipped high", logp: float64(ln(0.8)), prox: float64(ln(0.4)), behav: float64(ln(0.4)), adv: 1, n: 1, loss: -1.4, grad: 0, clip: 1},
		// ratio 0.5 < 0.6 with A < 0: pg = max(0.5, 0.6)·|A| → clipped, no gradient.
		{name: "clipped low", logp: float64(ln(0.2)), prox: float64(ln(0.4)), behav: float64(ln(0.4)), adv: -1, n: 1, loss: 0.6, grad: 0, clip: 1},
		// ratio 0.5 < 0.6 with A > 0: unclipped −A·0.5 is larger; gradient flows.
		{name: "low ratio positive advantage", logp: float64(ln(0.2)), prox: float64(ln(0.4)), behav: float64(ln(0.4)), adv: 1, n: 2, loss: -0.25, grad: -0.25},
		// w = 0.6/0.1 = 6 > 5: masked, still counted in N.
		{name: "capped", logp: float64(ln(0.6)), prox: float64(ln(0.6)), behav: float64(ln(0.1)), adv: 1, n: 1, loss: 0, grad: 0, capped: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mb := oneNode(1)
			seqs := []Seq{{Offset: 1, Adv: []float32{float32(c.adv)}, Behav: []float32{float32(c.behav)}}}
			var st Stats
			loss, d, err := DefaultConfig().Compute(mb, seqs, []float32{0, float32(c.logp)}, []float32{0, float32(c.prox)}, []float32{0, 0.7}, c.n, &st)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(loss-c.loss) > 1e-5 || math.Abs(float64(d[1])-c.grad) > 1e-5 || d[0] != 0 {
				t.Fatalf("loss %v grad %v, want %v %v", loss, d, c.loss, c.grad)
			}
			if st.ClipCount != c.clip || st.CapMasked != c.capped || st.Tokens != 1 || math.Abs(st.Entropy()-0.7) > 1e-6 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestSharedNodeSumsReferences(t *testing.T) {
	// Three sequences share the scored node with different advantages and behaviour log-probs:
	// the node's gradient is the sum of the three per-sequence gradients.
	mb := oneNode(3)
	seqs := []Seq{
		{Offset: 1, Adv: []float32{1}, Behav: []float32{-1}},
		{Offset: 1, Adv: []float32{-2}, Behav: []float32{-1.5}},
		{Offset: 1, Adv: []float32{0.5}, Behav: []float32{-0.9}},
	}
	logp, prox := []float32{0, -1.1}, []float32{0, -1}
	loss, d, err := DefaultConfig().Compute(mb, seqs, logp, prox, nil, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wantLoss, wantGrad float64
	ratio := math.Exp(-0.1)
	for _, s := range seqs {
		w := math.Exp(-1 - float64(s.Behav[0]))
		wantLoss += -float64(s.Adv[0]) * ratio * w / 3
		wantGrad += -float64(s.Adv[0]) * ratio * w / 3
	}
	if math.Abs(loss-wantLoss) > 1e-6 || math.Abs(float64(d[1])-wantGrad) > 1e-6 {
		t.Fatalf("loss %v grad %v, want %v %v", loss, d[1], wantLoss, wantGrad)
	}
}

// randomBatch packs random prefix-sharing sequences and gives every loss token random advantage
// and behaviour log-prob.
func randomBatch(r *rand.Rand) (*prefixtree.Packing, []prefixtree.Sequence, []Seq) {
	var ps []prefixtree.Sequence
	for i := 0; i < 12; i++ {
		var toks []int32
		if len(ps) > 0 && r.IntN(3) != 0 {
			b := ps[r.IntN(len(ps))].Tokens
			toks = append(toks, b[:1+r.IntN(len(b))]...)
		}
		for n := 2 + r.IntN(6); n > 0; n-- {
			toks = append(toks, int32(r.IntN(3)))
		}
		loss := make([]bool, len(toks))
		for j := 1; j < len(toks); j++ {
			loss[j] = r.IntN(2) == 0
		}
		ps = append(ps, prefixtree.Sequence{Tokens: toks, Loss: loss})
	}
	p, err := prefixtree.Pack(ps, prefixtree.Config{MaxTokensPerMB: 40})
	if err != nil {
		panic(err)
	}
	seqs := make([]Seq, len(ps))
	for i, s := range ps {
		seqs[i] = Seq{Offset: 0, Adv: make([]float32, len(s.Tokens)), Behav: make([]float32, len(s.Tokens))}
		for j := range s.Tokens {
			seqs[i].Adv[j] = float32(r.NormFloat64())
			seqs[i].Behav[j] = float32(-0.2 - 2*r.Float64())
		}
	}
	return p, ps, seqs
}

// contextLogp is a deterministic stand-in for a model: the log-prob of a token depends only on its
// context (the tokens up to and including it), as a real causal model's does.
func contextLogp(ctx []int32, salt uint64) float32 {
	h := fnv.New64a()
	for _, t := range ctx {
		h.Write([]byte{byte(t), byte(t >> 8)})
	}
	return float32(-0.1 - float64((h.Sum64()^salt)%1000)/400)
}

func nodeLogps(mb *prefixtree.MicroBatch, salt uint64) []float32 {
	out := make([]float32, mb.Len())
	for i := range out {
		var ctx []int32
		for n := i; n >= 0; n = int(mb.Parent[n]) {
			ctx = append([]int32{mb.Tokens[n]}, ctx...)
		}
		out[i] = contextLogp(ctx, salt)
	}
	return out
}

// TestFiniteDifferences checks dloss/dlogp against central differences of Compute itself, at
// points away from the clip and cap kinks.
func TestFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cfg := DefaultConfig()
	lo, hi := cfg.bounds()
	const h = 1.0 / 1024
	checked := 0
	for iter := 0; iter < 20; iter++ {
		p, _, seqs := randomBatch(r)
		for _, mb := range p.MicroBatches {
			logp := make([]float32, mb.Len())
			prox := make([]float32, mb.Len())
			for i := range logp {
				prox[i] = float32(-0.1 - 2*r.Float64())
				logp[i] = prox[i] + float32(0.8*(r.Float64()-0.5))
			}
			_, d, err := cfg.Compute(mb, seqs, logp, prox, nil, p.LossTokens, nil)
			if err != nil {
				t.Fatal(err)
			}
			for c := 0; c < mb.Len(); c++ {
				ratio := math.Exp(float64(logp[c] - prox[c]))
				if math.Abs(ratio*math.Exp(h)-lo) < 0.01 || math.Abs(ratio*math.Exp(-h)-lo) < 0.01 ||
					math.Abs(ratio*math.Exp(h)-hi) < 0.01 || math.Abs(ratio*math.Exp(-h)-hi) < 0.01 {
					continue
				}
				orig := logp[c]
				logp[c] = orig + h
				up, _, _ := cfg.Compute(mb, seqs, logp, prox, nil, p.LossTokens, nil)
				logp[c] = orig - h
				down, _, _ := cfg.Compute(mb, seqs, logp, prox, nil, p.LossTokens, nil)
				logp[c] = orig
				fd := (up - down) / (2 * h)
				if math.Abs(fd-float64(d[c])) > 2e-3*max(1, math.Abs(fd)) {
					t.Fatalf("node %d: analytic %v, finite difference %v", c, d[c], fd)
				}
				checked++
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d nodes checked", checked)
	}
}

// TestTreeEqualsUnpacked: loss and per-context gradients over a packed tree equal those of
// packing every sequence on its own.
func TestTreeEqualsUnpacked(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	cfg := DefaultConfig()
	for iter := 0; iter < 20; iter++ {
		p, ps, seqs := randomBatch(r)
		gradByContext := func(mb *prefixtree.MicroBatch, d []float32, acc map[string]float64) {
			for i := range d {
				var key []byte
				for n := i; n >= 0; n = int(mb.Parent[n]) {
					key = append(key, byte(mb.Tokens[n]), ',')
				}
				acc[string(key)] += float64(d[i])
			}
		}
		tree := map[string]float64{}
		var treeLoss float64
		var treeStats Stats
		for _, mb := range p.MicroBatches {
			lp := nodeLogps(mb, 1)
			px := nodeLogps(mb, 2)
			l, d, err := cfg.Compute(mb, seqs, lp, px, nil, p.LossTokens, &treeStats)
			if err != nil {
				t.Fatal(err)
			}
			treeLoss += l
			gradByContext(mb, d, tree)
		}
		flat := map[string]float64{}
		var flatLoss float64
		var flatStats Stats
		for i, s := range ps {
			one, err := prefixtree.Pack([]prefixtree.Sequence{s}, prefixtree.Config{MaxTokensPerMB: 40})
			if err != nil {
				t.Fatal(err)
			}
			mb := one.MicroBatches[0]
			lp, px := nodeLogps(mb, 1), nodeLogps(mb, 2)
			l, d, err := cfg.Compute(mb, []Seq{seqs[i]}, lp, px, nil, p.LossTokens, &flatStats)
			if err != nil {
				t.Fatal(err)
			}
			flatLoss += l
			gradByContext(mb, d, flat)
		}
		if math.Abs(treeLoss-flatLoss) > 1e-9 || treeStats.Tokens != flatStats.Tokens || treeStats.ClipCount != flatStats.ClipCount {
			t.Fatalf("tree loss %v (%+v), unpacked %v (%+v)", treeLoss, treeStats, flatLoss, flatStats)
		}
		for k, v := range flat {
			if math.Abs(tree[k]-v) > 1e-6 {
				t.Fatalf("context %q: tree grad %v, unpacked %v", k, tree[k], v)
			}
		}
	}
}

func TestComputeErrors(t *testing.T) {
	mb := oneNode(1)
	good := []Seq{{Offset: 1, Adv: []float32{1}, Behav: []float32{-1}}}
	lp := []float32{0, -1}
	nan := float32(math.NaN())
	cases := []struct {
		name string
		cfg  Config
		seqs []Seq
		logp []float32
		n    int64
		want string
	}{
		{"eps", Config{EpsClip: 1.5}, good, lp, 1, "eps_clip"},
		{"cap", Config{EpsClip: 0.2, BehavImpWeightCap: -1}, good, lp, 1, "behav_imp_weight_cap"},
		{"lengths", DefaultConfig(), good, lp[:1], 1, "nodes"},
		{"normaliser", DefaultConfig(), good, lp, 0, "normaliser"},
		{"sequence", DefaultConfig(), nil, lp, 1, "sequence 0 of 0"},
		{"offset", DefaultConfig(), []Seq{{Offset: 2, Adv: []float32{1}, Behav: []float32{-1}}}, lp, 1, "outside its data"},
		{"nan logp", DefaultConfig(), good, []float32{0, nan}, 1, "log-prob"},
		{"nan adv", DefaultConfig(), []Seq{{Offset: 1, Adv: []float32{nan}, Behav: []float32{-1}}}, lp, 1, "advantage"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := c.cfg.Compute(mb, c.seqs, c.logp, lp, nil, c.n, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}
