package loss

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"tau2rl/trainer/prefixtree"
)

// objectiveInput gives every node of mb a current and proximal log-prob near the other (ratio in
// [e^−0.2, e^0.2], inside PPO's clip range with margin) and every sequence a behaviour log-prob
// near the proximal one (weight far below the cap), so the loss is smooth there for every
// objective and finite differences apply.
func objectiveInput(r *rand.Rand, mb *prefixtree.MicroBatch, seqs []Seq, n int64) Input {
	logp, prox, ent := make([]float32, mb.Len()), make([]float32, mb.Len()), make([]float32, mb.Len())
	for i := range logp {
		prox[i] = float32(-0.2 - 2*r.Float64())
		logp[i] = prox[i] + float32(0.4*(r.Float64()-0.5))
		ent[i] = float32(r.Float64())
	}
	return Input{MB: mb, Seqs: seqs, Logp: logp, Prox: prox, Entropy: ent, N: n}
}

// smoothSeqs is randomBatch's sequences with behaviour log-probs replaced by values close to any
// proximal log-prob objectiveInput draws (|prox − behav| < 1.2, weight < e^1.2 < 5).
func smoothSeqs(r *rand.Rand, seqs []Seq) []Seq {
	out := make([]Seq, len(seqs))
	for i, s := range seqs {
		b := make([]float32, len(s.Behav))
		for k := range b {
			b[k] = float32(-1.2 + 0.2*(r.Float64()-0.5))
		}
		out[i] = Seq{Offset: s.Offset, Adv: s.Adv, Behav: b}
	}
	return out
}

// TestObjectives runs every registered objective through the contract the trainers rely on: one
// gradient per node, the analytic gradient equal to finite differences of the loss, packing
// changing nothing (a packed tree gives the loss and the per-context gradients of every sequence
// trained on its own), statistics that merge, and bad input refused with an error, not a panic or
// a NaN. A new objective registered in registry.go is tested here with no test of its own
// needed for these properties.
func TestObjectives(t *testing.T) {
	names := Names()
	for _, want := range []string{ObjectivePPO, ObjectiveNLL} {
		if !slices.Contains(names, want) {
			t.Fatalf("built-in objective %q not registered: %v", want, names)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Objective = name
			obj, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if obj.Name() != name {
				t.Fatalf("Name() = %q", obj.Name())
			}
			r := rand.New(rand.NewPCG(11, 12))
			const h = 1.0 / 1024
			for iter := 0; iter < 10; iter++ {
				p, ps, seqs := randomBatch(r)
				seqs = smoothSeqs(r, seqs)
				var treeStats Stats
				for _, mb := range p.MicroBatches {
					in := objectiveInput(r, mb, seqs, p.LossTokens)
					res, err := Evaluate(obj, in)
					if err != nil {
						t.Fatal(err)
					}
					if math.IsNaN(res.Loss) || res.Stats.Loss != res.Loss {
						t.Fatalf("loss %v, stats loss %v", res.Loss, res.Stats.Loss)
					}
					treeStats.Add(res.Stats)
					// Finite differences of the loss in each node's current log-prob.
					for c := 0; c < mb.Len(); c++ {
						orig := in.Logp[c]
						in.Logp[c] = orig + h
						up, err1 := obj.Compute(in)
						in.Logp[c] = orig - h
						down, err2 := obj.Compute(in)
						in.Logp[c] = orig
						if err1 != nil || err2 != nil {
							t.Fatal(err1, err2)
						}
						fd := (up.Loss - down.Loss) / (2 * h)
						if math.Abs(fd-float64(res.DLogp[c])) > 2e-3*max(1, math.Abs(fd)) {
							t.Fatalf("node %d: analytic %v, finite difference %v", c, res.DLogp[c], fd)
						}
						if mb.RefStart[c] == mb.RefStart[c+1] && res.DLogp[c] != 0 {
							t.Fatalf("node %d scores nothing but has gradient %v", c, res.DLogp[c])
						}
					}
				}
				if treeStats.Tokens != p.LossTokens {
					t.Fatalf("stats count %d loss tokens, the packing has %d", treeStats.Tokens, p.LossTokens)
				}
				// Log-probs that depend only on the context (as a model's do), so the packed tree
				// and every sequence packed alone see the same ones: same loss in total, same
				// gradient per context.
				flat := map[string]float64{}
				var flatLoss float64
				for i, s := range ps {
					one, err := prefixtree.Pack([]prefixtree.Sequence{s}, prefixtree.Config{MaxTokensPerMB: 40})
					if err != nil {
						t.Fatal(err)
					}
					mb := one.MicroBatches[0]
					in := Input{MB: mb, Seqs: []Seq{seqs[i]}, Logp: nodeLogps(mb, 1), Prox: nodeLogps(mb, 1), N: p.LossTokens}
					res, err := Evaluate(obj, in)
					if err != nil {
						t.Fatal(err)
					}
					flatLoss += res.Loss
					accumulate(mb, res.DLogp, flat)
				}
				tree := map[string]float64{}
				var treeLoss float64
				for _, mb := range p.MicroBatches {
					in := Input{MB: mb, Seqs: seqs, Logp: nodeLogps(mb, 1), Prox: nodeLogps(mb, 1), N: p.LossTokens}
					res, err := Evaluate(obj, in)
					if err != nil {
						t.Fatal(err)
					}
					treeLoss += res.Loss
					accumulate(mb, res.DLogp, tree)
				}
				if math.Abs(treeLoss-flatLoss) > 1e-9 {
					t.Fatalf("tree loss %v, every sequence alone %v", treeLoss, flatLoss)
				}
				for k, v := range flat {
					if math.Abs(tree[k]-v) > 1e-6 {
						t.Fatalf("context %q: tree gradient %v, alone %v", k, tree[k], v)
					}
				}
			}

			// Bad input: an error naming the problem.
			mb := oneNode(1)
			good := Input{MB: mb, Seqs: []Seq{{Offset: 1, Adv: []float32{1}, Behav: []float32{-1}}},
				Logp: []float32{0, -1}, Prox: []float32{0, -1}, N: 1}
			for _, c := range []struct {
				name string
				edit func(*Input)
				want string
			}{
				{"nan log-prob", func(in *Input) { in.Logp = []float32{0, float32(math.NaN())} }, "log-prob"},
				{"short log-probs", func(in *Input) { in.Logp = in.Logp[:1] }, "nodes"},
				{"zero normaliser", func(in *Input) { in.N = 0 }, "normaliser"},
			} {
				in := good
				c.edit(&in)
				if _, err := Evaluate(obj, in); err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s: err %v, want %q", c.name, err, c.want)
				}
			}
		})
	}
}

// accumulate adds each node's gradient to the map entry of its context (the token path from the
// root), so gradients of packings that place contexts differently compare.
func accumulate(mb *prefixtree.MicroBatch, d []float32, acc map[string]float64) {
	for i := range d {
		var key []byte
		for n := i; n >= 0; n = int(mb.Parent[n]) {
			key = append(key, byte(mb.Tokens[n]), ',')
		}
		acc[string(key)] += float64(d[i])
	}
}

// TestRegistry: names are checked, duplicates and unknown objectives refused with the list of
// registered ones, and a zero Config is PPO (a leader's step from before actor.objective existed).
func TestRegistry(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatalf("%s: no panic", name)
			}
		}()
		f()
	}
	mustPanic("duplicate", func() { Register(ObjectivePPO, newPPO) })
	mustPanic("empty name", func() { Register("", newNLL) })
	mustPanic("upper case", func() { Register("PPO2", newNLL) })
	mustPanic("nil factory", func() { Register("x_nil", nil) })

	_, err := New(Config{Objective: "cispo"})
	if err == nil || !strings.Contains(err.Error(), `unknown objective "cispo"`) || !strings.Contains(err.Error(), "nll, ppo") {
		t.Fatalf("unknown objective: %v", err)
	}
	if err := (Config{Objective: "cispo", EpsClip: 0.2}).Validate(); err == nil {
		t.Fatal("Validate accepted an unknown objective")
	}
	o, err := New(Config{EpsClip: 0.2})
	if err != nil || o.Name() != ObjectivePPO {
		t.Fatalf("zero objective: %v %v", o, err)
	}
	// The PPO objective validates its settings; NLL reads none.
	if _, err := New(Config{Objective: ObjectivePPO, EpsClip: 1.5}); err == nil || !strings.Contains(err.Error(), "eps_clip") {
		t.Fatalf("ppo with eps_clip 1.5: %v", err)
	}
	if _, err := New(Config{Objective: ObjectiveNLL}); err != nil {
		t.Fatalf("nll: %v", err)
	}
}

// TestPPOObjectiveIsCompute: the "ppo" objective returns exactly what Config.Compute returns
// (loss, every gradient and every statistic, bit for bit), so moving the trainers onto the
// interface changed no number.
func TestPPOObjectiveIsCompute(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	cfg := DefaultConfig()
	obj, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for iter := 0; iter < 10; iter++ {
		p, _, seqs := randomBatch(r)
		for _, mb := range p.MicroBatches {
			in := objectiveInput(r, mb, seqs, p.LossTokens)
			var want Stats
			l, d, err := cfg.Compute(mb, seqs, in.Logp, in.Prox, in.Entropy, in.N, &want)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Evaluate(obj, in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Loss != l || !slices.Equal(res.DLogp, d) || res.Stats != want {
				t.Fatalf("objective %v %v %+v, Compute %v %v %+v", res.Loss, res.DLogp, res.Stats, l, d, want)
			}
		}
	}
}

// TestNLLObjectiveIsNLL: the same for "nll" and NLL.
func TestNLLObjectiveIsNLL(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	obj, err := New(Config{Objective: ObjectiveNLL})
	if err != nil {
		t.Fatal(err)
	}
	p, _, seqs := randomBatch(r)
	for _, mb := range p.MicroBatches {
		in := objectiveInput(r, mb, seqs, p.LossTokens)
		l, d, n, err := NLL(mb, in.Logp, in.N)
		if err != nil {
			t.Fatal(err)
		}
		in.Seqs, in.Prox = nil, nil // SFT passes neither
		res, err := Evaluate(obj, in)
		if err != nil {
			t.Fatal(err)
		}
		if res.Loss != l || !slices.Equal(res.DLogp, d) || res.Stats.Tokens != n || res.Stats.Loss != l {
			t.Fatalf("objective %v %+v, NLL %v %d", res.Loss, res.Stats, l, n)
		}
	}
}
