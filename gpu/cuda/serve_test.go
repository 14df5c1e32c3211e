//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"tau2rl/gpu"
)

// serveReference is the float64 attention of every new token over its sequence's positions
// [0, Start+i] read through its block table from the cache after the write (K, V as float64).
func serveReference(seqs []gpu.ServeSeq, K, V, Q []float64, nh, nkv, d, bs int) []float64 {
	QD, KVD := nh*d, nkv*d
	n := 0
	for _, s := range seqs {
		n += len(s.Tokens)
	}
	ref := make([]float64, n*QD)
	g := nh / nkv
	scale := 1 / math.Sqrt(float64(d))
	r := 0
	for _, s := range seqs {
		slot := func(p int) int { return int(s.Blocks[p/bs])*bs + p%bs }
		for i := range s.Tokens {
			pos := s.Start + i
			for h := range nh {
				q := Q[(r+i)*QD+h*d:][:d]
				sc := make([]float64, pos+1)
				mx := math.Inf(-1)
				for p := 0; p <= pos; p++ {
					k := K[slot(p)*KVD+(h/g)*d:][:d]
					var dot float64
					for c := range q {
						dot += q[c] * k[c]
					}
					sc[p] = dot * scale
					mx = max(mx, sc[p])
				}
				var sum float64
				for p := range sc {
					sc[p] = math.Exp(sc[p] - mx)
					sum += sc[p]
				}
				o := ref[(r+i)*QD+h*d:][:d]
				for p := range sc {
					v := V[slot(p)*KVD+(h/g)*d:][:d]
					for c := range o {
						o[c] += sc[p] / sum * v[c]
					}
				}
			}
		}
		r += len(s.Tokens)
	}
	return ref
}

// TestServeAttentionCascade: decode tokens of sequences that share cached prefix blocks (a τ²
// step: one system prompt for all, one task opening per group, ragged own suffixes, some sharing
// nothing) read the shared ranges once per group on the tensor-core paged kernel (cascade
// attention, merged by log-sum-exp); prefill chunks after a cached prefix run on the same kernel.
// Both against float64, for GQA 2/4/8, head_dim 64/128, block sizes 8/16/32, decode-only steps
// and mixed ones; and against the CUDA-core path (noMMA), which must agree to bf16 rounding.
func TestServeAttentionCascade(t *testing.T) {
	for _, tc := range []struct{ nh, nkv, d, bs int }{{4, 2, 64, 16}, {16, 8, 128, 16}, {16, 4, 128, 8}, {8, 1, 64, 32}} {
		t.Run(fmt.Sprintf("nh%d_kv%d_d%d_bs%d", tc.nh, tc.nkv, tc.d, tc.bs), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.nh), uint64(tc.bs)))
			cfg := smallConfig()
			cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = tc.nh, tc.nkv, tc.d
			kv := gpu.KVCacheSpec{BlockSize: tc.bs, NumBlocks: 2048}
			pool := newBlockPool(rng, kv.NumBlocks)
			bs := tc.bs
			sys := pool.take(300 / bs)                     // shared by every conversation
			tasks := [][]int32{pool.take(3), pool.take(2)} // per group
			type conv struct {
				task  int // -1: no task prefix; -2: shares nothing
				start int
			}
			// 70 conversations so that a group spans several 64-row items at every GQA width
			var convs []conv
			for i := range 70 {
				convs = append(convs, conv{i % 2, len(sys)*bs + 3*bs + rng.IntN(5*bs)})
			}
			convs = append(convs, conv{-1, len(sys)*bs + rng.IntN(bs)}, conv{-2, 150}, conv{-2, 2 * bs})
			mk := func(c conv, chunk int) gpu.ServeSeq {
				var blocks []int32
				prefix := 0
				switch c.task {
				case -2:
				case -1:
					blocks, prefix = slices.Clone(sys), len(sys)*bs
				default:
					blocks, prefix = slices.Concat(sys, tasks[c.task]), (len(sys)+len(tasks[c.task]))*bs
				}
				end := c.start + chunk
				own := (end+bs-1)/bs - prefix/bs
				blocks = append(blocks, pool.take(own)...)
				return gpu.ServeSeq{Tokens: make([]int32, chunk), Start: c.start, Blocks: blocks}
			}
			for _, mixed := range []bool{false, true} {
				var seqs []gpu.ServeSeq
				for _, c := range convs {
					seqs = append(seqs, mk(c, 1))
				}
				if mixed { // a prefill chunk after the shared prefix, and a fresh prompt
					seqs = append(seqs, mk(conv{0, len(sys)*bs + 3*bs + 5}, 150), mk(conv{-2, 0}, 40))
				}
				n := 0
				for _, s := range seqs {
					n += len(s.Tokens)
				}
				KVD, QD := cfg.KVDim(), cfg.QDim()
				pr := &servAttnProblem{cfg: cfg, kv: kv, seqs: seqs,
					cacheK: randBF16(rng, kv.Tokens()*KVD, 1), cacheV: randBF16(rng, kv.Tokens()*KVD, 1),
					q: randBF16(rng, n*QD, 2), k: randBF16(rng, n*KVD, 1), v: randBF16(rng, n*KVD, 1)}
				d := &Decoder{cfg: cfg, kv: kv, sms: 132}
				p := d.plan(seqs)
				if len(p.mitems) == 0 {
					t.Fatal("no tensor-core items planned: the test does not test")
				}
				att, ck, cv, err := runServeAttention(pr)
				if err != nil {
					t.Fatal(err)
				}
				ref := serveReference(seqs, bf16s(ck), bf16s(cv), bf16s(pr.q), tc.nh, tc.nkv, tc.d, bs)
				e := relErrBF16(att, ref)
				pr.ownMMA = true
				own, _, _, err := runServeAttention(pr)
				if err != nil {
					t.Fatal(err)
				}
				eOwn := relErrBF16(own, ref)
				pr.ownMMA, pr.noMMA = false, true
				old, _, _, err := runServeAttention(pr)
				if err != nil {
					t.Fatal(err)
				}
				eOld := relErrBF16(old, ref)
				if !(eOwn < 1e-2) || eOwn > 2*eOld+1e-3 {
					t.Fatalf("own blocks on the tensor cores too: relative error %.3e (CUDA-core path %.3e)", eOwn, eOld)
				}
				t.Logf("mixed=%v: %d tokens, %d tensor-core items, %d CUDA-core items; relative error vs float64 %.2e (CUDA-core path %.2e)",
					mixed, n, len(p.mitems)/8, len(p.items)/8, e, eOld)
				if !(e < 1e-2) || e > 2*eOld+1e-3 {
					t.Fatalf("relative error %.3e (CUDA-core path %.3e)", e, eOld)
				}
			}
		})
	}
}
