package cpu

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"tau2rl/gpu"
)

// The golden fixture for Hugging Face parity. testdata/ holds two tiny random Qwen3 checkpoints
// (tied fp32, untied bf16 with rope_theta 1e6) and golden.json: token sequences with the per-token
// log-probs and entropies this reference computes for them. testdata/hf_reference.py recomputes
// the same numbers with transformers' Qwen3ForCausalLM (run on the GPU machine, where PyTorch is);
// this test pins the Go side and checks tree packing against the per-sequence values.
//
// Regenerate (only when the fixture must change): go test ./gpu/cpu -run Golden -update

var update = flag.Bool("update", false, "rewrite testdata golden files")

type goldenCase struct {
	Name           string    `json:"name"`
	Checkpoint     string    `json:"checkpoint"`
	Tokens         []int32   `json:"tokens"`
	PositionOffset int32     `json:"position_offset"`
	LogProbs       []float64 `json:"logprobs"` // logprobs[i] = log p(tokens[i+1] | tokens[:i+1])
	Entropy        []float64 `json:"entropy"`  // entropy of that same distribution
}

type goldenFile struct {
	Comment string       `json:"comment"`
	Cases   []goldenCase `json:"cases"`
}

type goldenCheckpoint struct {
	dir   string
	cfg   gpu.Config
	seed  uint64
	dtype gpu.DType
}

func goldenCheckpoints() []goldenCheckpoint {
	tied := gpu.TinyConfig()
	untied := gpu.TinyConfig()
	untied.TieWordEmbeddings = false
	untied.RopeTheta = 1e6
	untied.MaxPositionEmbeddings = 40960
	untied.TorchDtype = string(gpu.BF16)
	return []goldenCheckpoint{
		{"tiny-tied", tied, 20260101, gpu.F32},
		{"tiny-untied", untied, 20260102, gpu.BF16},
	}
}

var goldenInit = gpu.InitOptions{Std: 0.2, NormJitter: 0.2}

// chainAt is Chain with positions starting at offset (a continuation deep in a long context).
func chainAt(tokens []int32, offset int32) *gpu.MicroBatch {
	mb := gpu.Chain(tokens)
	for i := range mb.Positions {
		mb.Positions[i] += offset
	}
	return mb
}

func goldenSequences() []goldenCase {
	rng := rand.New(rand.NewPCG(77, 77))
	seq := func(n int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(rng.IntN(64))
		}
		return s
	}
	prefix := seq(12)
	a := append(append([]int32(nil), prefix...), seq(8)...)
	b := append(append([]int32(nil), prefix...), seq(6)...)
	c := seq(10)
	var cases []goldenCase
	for _, ck := range []string{"tiny-tied", "tiny-untied"} {
		cases = append(cases,
			goldenCase{Name: "shared-prefix-a", Checkpoint: ck, Tokens: a},
			goldenCase{Name: "shared-prefix-b", Checkpoint: ck, Tokens: b},
			goldenCase{Name: "deep-positions", Checkpoint: ck, Tokens: c, PositionOffset: 30000},
		)
	}
	return cases
}

func TestGolden(t *testing.T) {
	if *update {
		for _, g := range goldenCheckpoints() {
			if _, err := gpu.WriteRandomCheckpoint(filepath.Join("testdata", g.dir), g.cfg, g.seed, goldenInit, g.dtype); err != nil {
				t.Fatal(err)
			}
		}
		gf := goldenFile{Comment: "per-token log-probs and entropies of gpu/cpu on these checkpoints; " +
			"hf_reference.py checks them against transformers. Regenerate: go test ./gpu/cpu -run Golden -update"}
		for _, c := range goldenSequences() {
			b, err := Load(filepath.Join("testdata", c.Checkpoint))
			if err != nil {
				t.Fatal(err)
			}
			lp, en, err := b.LogProbs(chainAt(c.Tokens, c.PositionOffset))
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(lp); i++ {
				c.LogProbs = append(c.LogProbs, float64(lp[i]))
				c.Entropy = append(c.Entropy, float64(en[i]))
			}
			gf.Cases = append(gf.Cases, c)
		}
		out, _ := json.MarshalIndent(gf, "", "  ")
		if err := os.WriteFile("testdata/golden.json", append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var gf goldenFile
	if err := json.Unmarshal(raw, &gf); err != nil {
		t.Fatal(err)
	}
	if len(gf.Cases) == 0 {
		t.Fatal("golden.json has no cases")
	}
	backends := map[string]*Backend{}
	for _, c := range gf.Cases {
		b := backends[c.Checkpoint]
		if b == nil {
			if b, err = Load(filepath.Join("testdata", c.Checkpoint)); err != nil {
				t.Fatal(err)
			}
			backends[c.Checkpoint] = b
		}
		lp, en, err := b.LogProbs(chainAt(c.Tokens, c.PositionOffset))
		if err != nil {
			t.Fatal(err)
		}
		if len(c.LogProbs) != len(c.Tokens)-1 {
			t.Fatalf("%s/%s: %d golden log-probs for %d tokens", c.Checkpoint, c.Name, len(c.LogProbs), len(c.Tokens))
		}
		for i := range c.LogProbs {
			if math.Abs(float64(lp[i+1])-c.LogProbs[i]) > 1e-6 || math.Abs(float64(en[i+1])-c.Entropy[i]) > 1e-6 {
				t.Fatalf("%s/%s token %d: logp %v entropy %v, golden %v %v",
					c.Checkpoint, c.Name, i+1, lp[i+1], en[i+1], c.LogProbs[i], c.Entropy[i])
			}
		}
	}
}

// TestGoldenTreePacked packs the two shared-prefix sequences and the deep-position one into one
// tree micro-batch and checks every node against the golden per-sequence values.
func TestGoldenTreePacked(t *testing.T) {
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var gf goldenFile
	if err := json.Unmarshal(raw, &gf); err != nil {
		t.Fatal(err)
	}
	for _, ck := range []string{"tiny-tied", "tiny-untied"} {
		var cases []goldenCase
		for _, c := range gf.Cases {
			if c.Checkpoint == ck {
				cases = append(cases, c)
			}
		}
		mb, nodes := packTrie(cases)
		b, err := Load(filepath.Join("testdata", ck))
		if err != nil {
			t.Fatal(err)
		}
		lp, en, err := b.LogProbs(mb)
		if err != nil {
			t.Fatal(err)
		}
		if mb.Len() >= len(cases[0].Tokens)+len(cases[1].Tokens)+len(cases[2].Tokens) {
			t.Fatalf("%s: packing shared nothing (%d nodes)", ck, mb.Len())
		}
		for s, c := range cases {
			for i := range c.LogProbs {
				n := nodes[s][i+1]
				if math.Abs(float64(lp[n])-c.LogProbs[i]) > 1e-5 || math.Abs(float64(en[n])-c.Entropy[i]) > 1e-5 {
					t.Fatalf("%s/%s token %d (node %d): tree logp %v entropy %v, golden %v %v",
						ck, c.Name, i+1, n, lp[n], en[n], c.LogProbs[i], c.Entropy[i])
				}
			}
		}
	}
}

// packTrie merges sequences (with their position offsets) into a token trie and lays it out in
// pre-order; nodes[s][i] is the node of sequence s's token i. A minimal packer for tests: the
// trainer owns the real one.
func packTrie(cases []goldenCase) (*gpu.MicroBatch, [][]int) {
	type tnode struct {
		tok      int32
		pos      int32
		children []*tnode
		idx      int
	}
	root := &tnode{}
	paths := make([][]*tnode, len(cases))
	for s, c := range cases {
		cur := root
		for i, tok := range c.Tokens {
			var next *tnode
			for _, ch := range cur.children {
				if ch.tok == tok && ch.pos == c.PositionOffset+int32(i) {
					next = ch
				}
			}
			if next == nil {
				next = &tnode{tok: tok, pos: c.PositionOffset + int32(i)}
				cur.children = append(cur.children, next)
			}
			paths[s] = append(paths[s], next)
			cur = next
		}
	}
	mb := &gpu.MicroBatch{}
	var walk func(n *tnode, parent int32)
	walk = func(n *tnode, parent int32) {
		n.idx = mb.Len()
		mb.Tokens = append(mb.Tokens, n.tok)
		mb.Positions = append(mb.Positions, n.pos)
		mb.Parent = append(mb.Parent, parent)
		mb.SubtreeEnd = append(mb.SubtreeEnd, 0)
		for _, ch := range n.children {
			walk(ch, int32(n.idx))
		}
		mb.SubtreeEnd[n.idx] = int32(mb.Len() - 1)
	}
	for _, ch := range root.children {
		walk(ch, -1)
	}
	nodes := make([][]int, len(cases))
	for s, p := range paths {
		for _, n := range p {
			nodes[s] = append(nodes[s], n.idx)
		}
	}
	return mb, nodes
}

// TestGoldenCheckpointsReproducible regenerates each checkpoint from its seed and requires the
// committed bytes: the fixture is exactly what gpu.WriteRandomCheckpoint produces.
func TestGoldenCheckpointsReproducible(t *testing.T) {
	for _, g := range goldenCheckpoints() {
		dir := t.TempDir()
		if _, err := gpu.WriteRandomCheckpoint(dir, g.cfg, g.seed, goldenInit, g.dtype); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"config.json", "model.safetensors"} {
			want, err := os.ReadFile(filepath.Join("testdata", g.dir, f))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(filepath.Join(dir, f))
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s differs from a fresh WriteRandomCheckpoint", g.dir, f)
			}
		}
	}
}
