//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"tau2rl/gpu"
)

// smallConfig is a Qwen3 shape the GPU kernels support (head_dim 64) with every architectural
// feature: GQA (2 query heads per KV head), q width ≠ hidden, q/k norms, tied embeddings.
func smallConfig() gpu.Config {
	c := gpu.TinyConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 1000, 192, 384, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 4, 2, 64
	c.RopeTheta, c.MaxPositionEmbeddings = 1e6, 4096
	return c
}

// wideConfig exercises head_dim 128, a single KV head and untied embeddings.
func wideConfig() gpu.Config {
	c := smallConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize = 512, 256, 512
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim = 2, 1, 128
	c.TieWordEmbeddings = false
	return c
}

// qwen17Layer is one layer of Qwen3-1.7B's geometry (hidden 2048, intermediate 6144, 16 query and
// 8 KV heads of 128) with a small vocabulary: the row widths the element-wise kernels' multi-warp
// paths serve, which the small configs above never reach.
func qwen17Layer() gpu.Config {
	c := gpu.Qwen3_1_7B()
	c.VocabSize, c.NumHiddenLayers, c.MaxPositionEmbeddings = 1000, 1, 4096
	return c
}

// testWeights are random weights with a larger std than transformers' init, so logits spread and
// norm weights differ from one (the checks then see every parameter act).
func testWeights(t testing.TB, c gpu.Config, seed uint64) *gpu.Weights {
	t.Helper()
	return testWeightsStd(t, c, seed, 0.08)
}

// testWeightsStd is testWeights with another std: wide layers (qwen17Layer) need a smaller one for
// their logits to spread as the small configs' do, which is what the bf16 tolerances assume.
func testWeightsStd(t testing.TB, c gpu.Config, seed uint64, std float64) *gpu.Weights {
	t.Helper()
	w, err := gpu.NewRandomWeightsWith(c, seed, gpu.InitOptions{Std: std, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// packed is a micro-batch together with the node of every token of every sequence.
type packed struct {
	mb    *gpu.MicroBatch
	nodes [][]int // nodes[s][t] is the node holding token t of sequence s
}

// buildTree packs sequences into a prefix-tree forest in depth-first pre-order (children in
// first-insertion order), the layout the trainer's prefixtree produces.
func buildTree(seqs [][]int32) packed {
	type trie struct {
		tok      int32
		children []*trie
		node     int
	}
	root := &trie{}
	for _, s := range seqs {
		cur := root
		for _, tok := range s {
			var next *trie
			for _, ch := range cur.children {
				if ch.tok == tok {
					next = ch
					break
				}
			}
			if next == nil {
				next = &trie{tok: tok}
				cur.children = append(cur.children, next)
			}
			cur = next
		}
	}
	mb := &gpu.MicroBatch{}
	var walk func(t *trie, parent, depth int) int
	walk = func(t *trie, parent, depth int) int {
		i := len(mb.Tokens)
		t.node = i
		mb.Tokens = append(mb.Tokens, t.tok)
		mb.Positions = append(mb.Positions, int32(depth))
		mb.Parent = append(mb.Parent, int32(parent))
		mb.SubtreeEnd = append(mb.SubtreeEnd, 0)
		end := i
		for _, ch := range t.children {
			end = walk(ch, i, depth+1)
		}
		mb.SubtreeEnd[i] = int32(end)
		return end
	}
	for _, ch := range root.children {
		walk(ch, -1, 0)
	}
	p := packed{mb: mb}
	for _, s := range seqs {
		cur := root
		var ns []int
		for _, tok := range s {
			for _, ch := range cur.children {
				if ch.tok == tok {
					cur = ch
					break
				}
			}
			ns = append(ns, cur.node)
		}
		p.nodes = append(p.nodes, ns)
	}
	return p
}

// unpack puts every sequence as its own chain into one micro-batch (the baseline without sharing).
func unpack(seqs [][]int32) packed {
	mb := &gpu.MicroBatch{}
	var p packed
	for _, s := range seqs {
		start := len(mb.Tokens)
		var ns []int
		for t, tok := range s {
			mb.Tokens = append(mb.Tokens, tok)
			mb.Positions = append(mb.Positions, int32(t))
			mb.Parent = append(mb.Parent, int32(start+t-1))
			if t == 0 {
				mb.Parent[len(mb.Parent)-1] = -1
			}
			mb.SubtreeEnd = append(mb.SubtreeEnd, int32(start+len(s)-1))
			ns = append(ns, start+t)
		}
		p.nodes = append(p.nodes, ns)
	}
	p.mb = mb
	return p
}

// groupSequences makes GRPO-like groups: each group shares a prompt, its samples share partial
// continuations (multi-turn branching) and end in their own suffixes.
func groupSequences(rng *rand.Rand, vocab, groups, samples, prompt, turn int) [][]int32 {
	tok := func() int32 { return int32(rng.IntN(vocab)) }
	var seqs [][]int32
	for range groups {
		p := make([]int32, prompt+rng.IntN(prompt/2+1))
		for i := range p {
			p[i] = tok()
		}
		shared := append([]int32(nil), p...)
		for s := range samples {
			seq := append([]int32(nil), p...)
			if s%2 == 1 { // every other sample continues the previous sample's first turn
				seq = append([]int32(nil), shared...)
			}
			n := turn + rng.IntN(turn+1)
			for range n {
				seq = append(seq, tok())
			}
			if s%2 == 0 {
				shared = append([]int32(nil), seq[:len(p)+n/2]...)
			}
			seqs = append(seqs, seq)
		}
	}
	return seqs
}

// seqWeights draws a loss weight per (sequence, token) (token 0 carries none: it is unscored) and
// folds them onto a packing's nodes, so Σ_nodes dlogp·logp equals Σ_seq Σ_t w·logp.
func seqWeights(rng *rand.Rand, seqs [][]int32) [][]float32 {
	w := make([][]float32, len(seqs))
	for s, seq := range seqs {
		w[s] = make([]float32, len(seq))
		for t := 1; t < len(seq); t++ {
			w[s][t] = float32(rng.NormFloat64())
		}
	}
	return w
}

func (p packed) dlogp(w [][]float32) []float32 {
	d := make([]float32, p.mb.Len())
	for s, ns := range p.nodes {
		for t, n := range ns {
			d[n] += w[s][t]
		}
	}
	return d
}

// relErr is ‖a−b‖/‖b‖ (‖a−b‖ when b is zero).
func relErr(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

func maxAbs(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

func sortedKeys(m map[string][]float32) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// TestPackingHelpers checks the test packers themselves (no GPU needed): both are valid
// micro-batches, every token maps to a node holding it at its depth, and the tree shares.
func TestPackingHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	seqs := groupSequences(rng, 50, 3, 4, 20, 10)
	for name, p := range map[string]packed{"tree": buildTree(seqs), "unpacked": unpack(seqs)} {
		if err := p.mb.Validate(50); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for s, ns := range p.nodes {
			for tok, n := range ns {
				if p.mb.Tokens[n] != seqs[s][tok] || int(p.mb.Positions[n]) != tok {
					t.Fatalf("%s: seq %d token %d maps to node %d (token %d, position %d)", name, s, tok, n, p.mb.Tokens[n], p.mb.Positions[n])
				}
				if tok > 0 && int(p.mb.Parent[n]) != ns[tok-1] {
					t.Fatalf("%s: seq %d token %d: parent %d, want %d", name, s, tok, p.mb.Parent[n], ns[tok-1])
				}
			}
		}
	}
	if tr, fl := buildTree(seqs).mb.Len(), unpack(seqs).mb.Len(); tr >= fl {
		t.Errorf("tree %d nodes, unpacked %d: nothing shared", tr, fl)
	}
}
