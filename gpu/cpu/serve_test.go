package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"tau2rl/gpu"
)

// serveRun generates n tokens after prompt on d, prefilling in chunks of chunk tokens, with the
// sequence's blocks taken from a shuffled table (so the table, not the identity, maps positions).
func serveRun(t *testing.T, d *Decoder, prompt []int32, n, chunk int, p gpu.SampleParams, seed uint64) ([]int32, []float32) {
	t.Helper()
	B := d.KVSpec().BlockSize
	need := (len(prompt) + n + B - 1) / B
	perm := rand.New(rand.NewPCG(seed, 7)).Perm(d.KVSpec().NumBlocks)
	blocks := make([]int32, need)
	for i := range blocks {
		blocks[i] = int32(perm[i])
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	seq := append([]int32(nil), prompt...)
	var toks []int32
	var lps []float32
	start := 0
	for len(toks) < n {
		end := min(len(seq), start+chunk)
		s := gpu.ServeSeq{Tokens: seq[start:end], Start: start, Blocks: blocks, Sample: end == len(seq), Params: p}
		if s.Sample {
			s.Uniform = rng.Float64()
		}
		out, err := d.Step([]gpu.ServeSeq{s})
		if err != nil {
			t.Fatal(err)
		}
		start = end
		if s.Sample {
			toks = append(toks, out[0].Token)
			lps = append(lps, out[0].LogProb)
			seq = append(seq, out[0].Token)
		}
	}
	return toks, lps
}

func testWeights(t *testing.T, tied bool) *gpu.Weights {
	cfg := gpu.TinyConfig()
	cfg.TieWordEmbeddings = tied
	w, err := gpu.NewRandomWeightsWith(cfg, 3, gpu.InitOptions{Std: 0.5, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestDecoderMatchesTrainingLogProbs: sampled at temperature 1, every returned log-prob is the
// training backend's Backend.LogProbs of that token over the same sequence (the behaviour
// log-prob of the decoupled loss), and the result does not depend on block size or prefill chunk.
func TestDecoderMatchesTrainingLogProbs(t *testing.T) {
	for _, tied := range []bool{true, false} {
		w := testWeights(t, tied)
		be, err := New(w)
		if err != nil {
			t.Fatal(err)
		}
		prompt := []int32{1, 17, 5, 40, 33, 2, 9, 9, 60, 12, 3, 44, 21}
		const n = 20
		p := gpu.SampleParams{Temperature: 1, TopP: 1}
		var refT []int32
		var refL []float32
		for _, bs := range []int{1, 4, 16} {
			for _, chunk := range []int{1, 5, 1000} {
				d, err := NewDecoder(w, gpu.KVCacheSpec{BlockSize: bs, NumBlocks: 64/bs + 4})
				if err != nil {
					t.Fatal(err)
				}
				toks, lps := serveRun(t, d, prompt, n, chunk, p, 11)
				if refT == nil {
					refT, refL = toks, lps
					seq := append(append([]int32(nil), prompt...), toks...)
					logp, _, err := be.LogProbs(gpu.Chain(seq))
					if err != nil {
						t.Fatal(err)
					}
					for i, lp := range lps {
						want := logp[len(prompt)+i]
						if math.Abs(float64(lp-want)) > 2e-5 {
							t.Fatalf("tied=%v token %d: decoder log-prob %v, Backend.LogProbs %v", tied, i, lp, want)
						}
					}
					continue
				}
				for i := range refT {
					if toks[i] != refT[i] || lps[i] != refL[i] {
						t.Fatalf("tied=%v block %d chunk %d: token %d = (%d, %v), want (%d, %v)", tied, bs, chunk, i, toks[i], lps[i], refT[i], refL[i])
					}
				}
			}
		}
	}
}

// TestDecoderBatchedEqualsAlone: two sequences in one step give what each gives alone.
func TestDecoderBatchedEqualsAlone(t *testing.T) {
	w := testWeights(t, true)
	kv := gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 16}
	a := gpu.ServeSeq{Tokens: []int32{1, 2, 3, 4, 5, 6}, Blocks: []int32{3, 7}, Sample: true, Params: gpu.SampleParams{Temperature: 0.7, TopP: 0.9, TopK: 10}, Uniform: 0.3}
	b := gpu.ServeSeq{Tokens: []int32{9, 8, 7}, Blocks: []int32{1}, Sample: true, Params: gpu.SampleParams{TopP: 1}, Uniform: 0}
	alone := func(s gpu.ServeSeq) gpu.Sampled {
		d, err := NewDecoder(w, kv)
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.Step([]gpu.ServeSeq{s})
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	d, err := NewDecoder(w, kv)
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Step([]gpu.ServeSeq{a, {Tokens: []int32{5}, Blocks: []int32{2}}, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0] != alone(a) || out[1] != alone(b) {
		t.Fatalf("batched %v, alone %v %v", out, alone(a), alone(b))
	}
}

// TestDecoderRejects: malformed steps and weights are errors that change nothing.
func TestDecoderRejects(t *testing.T) {
	w := testWeights(t, true)
	d, err := NewDecoder(w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 4})
	if err != nil {
		t.Fatal(err)
	}
	good := gpu.ServeSeq{Tokens: []int32{1, 2}, Blocks: []int32{0}, Sample: true, Params: gpu.SampleParams{TopP: 1}}
	before, err := d.Step([]gpu.ServeSeq{good})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]gpu.ServeSeq{
		"token":   {Tokens: []int32{64}, Blocks: []int32{0}},
		"block":   {Tokens: []int32{1}, Blocks: []int32{4}},
		"table":   {Tokens: []int32{1, 2, 3, 4, 5}, Blocks: []int32{0}},
		"uniform": {Tokens: []int32{1}, Blocks: []int32{0}, Sample: true, Params: gpu.SampleParams{TopP: 1}, Uniform: 1},
		"top_p":   {Tokens: []int32{1}, Blocks: []int32{0}, Sample: true},
		"empty":   {Blocks: []int32{0}},
	} {
		if _, err := d.Step([]gpu.ServeSeq{s}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	bad := testWeights(t, false)
	if err := d.LoadWeights(bad); err == nil {
		t.Error("untied weights loaded into a tied decoder")
	}
	after, err := d.Step([]gpu.ServeSeq{good})
	if err != nil || after[0] != before[0] {
		t.Fatalf("after rejected inputs: %v %v, before %v", after, err, before)
	}
	if _, err := NewDecoder(w, gpu.KVCacheSpec{BlockSize: 3, NumBlocks: 4}); err == nil {
		t.Error("block size 3 accepted")
	}
}
