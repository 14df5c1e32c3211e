//go:build cuda

package cuda

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
)

// peakBF16 is the dense bf16 tensor-core peak used for MFU: 989 TFLOP/s for H100 SXM and H200
// (the same compute die), as llm.c's mfu.h computes it.
const peakBF16 = 989e12

// benchWeights is gpu.NewPoolWeights(cfg, 1) (random enough for timing, seconds for 1.7B
// parameters), cached per shape.
func benchWeights(cfg gpu.Config) *gpu.Weights {
	key := fmt.Sprint(cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.VocabSize)
	if w, ok := benchCache[key]; ok {
		return w
	}
	w, err := gpu.NewPoolWeights(cfg, 1)
	if err != nil {
		panic(err) // the benchmarks' shapes are valid Qwen3 configs
	}
	benchCache[key] = w
	return w
}

// benchCache keeps generated weights across the benchmark framework's b.N=1 probe and timed run.
var benchCache = map[string]*gpu.Weights{}

// modelFlops is the training FLOPs (forward + backward) of one micro-batch: 6 per parameter per
// token for every matmul weight (embedding lookups excluded, lm_head included) plus attention,
// 12·L·nh·hd per visible (query, key) pair. Recomputation is not counted (this is MFU, not HFU).
func modelFlops(cfg gpu.Config, mb *gpu.MicroBatch) float64 {
	H, I, L := float64(cfg.HiddenSize), float64(cfg.IntermediateSize), float64(cfg.NumHiddenLayers)
	qd, kvd := float64(cfg.QDim()), float64(cfg.KVDim())
	perLayer := H*(qd+2*kvd) + qd*H + 3*H*I
	matmul := L*perLayer + float64(cfg.VocabSize)*H
	var pairs float64
	for _, p := range mb.Positions {
		pairs += float64(p) + 1 // a node sees its depth+1 ancestors-or-self
	}
	n := float64(mb.Len())
	return 6*matmul*n + 12*L*qd*pairs
}

// chains packs count random sequences of length seqLen as independent chains.
func chains(rng *rand.Rand, vocab, count, seqLen int) *gpu.MicroBatch {
	seqs := make([][]int32, count)
	for i := range seqs {
		seqs[i] = make([]int32, seqLen)
		for j := range seqs[i] {
			seqs[i][j] = int32(rng.IntN(vocab))
		}
	}
	return unpack(seqs).mb
}

type benchRecord struct {
	Name          string  `json:"name"`
	Device        string  `json:"device"`
	Tokens        int     `json:"tokens"`
	StepMS        float64 `json:"step_ms"`
	TokensPerSec  float64 `json:"tokens_per_s"`
	MFU           float64 `json:"mfu"`
	HeldGB        float64 `json:"held_gb"`
	DeviceUsedGB  float64 `json:"device_used_gb"`
	Recompute     bool    `json:"recompute"`
	VocabTile     int     `json:"vocab_tile,omitempty"`
	Attention     string  `json:"attention,omitempty"` // the kernels that ran (Options.Attention, resolved)
	GEMM          string  `json:"gemm,omitempty"`      // Options.GEMM
	Note          string  `json:"note,omitempty"`
	SpeedupVsFlat float64 `json:"speedup_vs_unpacked,omitempty"`
}

func saveRecord(b *testing.B, r benchRecord) {
	dir := os.Getenv("T2_REPORT_DIR")
	if dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "go_bench.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.Logf("report: %v", err)
		return
	}
	defer f.Close()
	j, _ := json.Marshal(r)
	fmt.Fprintf(f, "%s\n", j)
}

func trainStep(b *testing.B, be *Backend, mbs []*gpu.MicroBatch, opt gpu.Optimizer) {
	for _, mb := range mbs {
		lp, _, err := be.Forward(mb)
		if err != nil {
			b.Fatal(err)
		}
		dl := make([]float32, len(lp))
		for i := range dl {
			dl[i] = 1e-3 * float32(i%7-3)
		}
		if err := be.Backward(dl); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := be.Step(opt); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTrainStep times a full training step (Forward, Backward, AdamW Step) on micro-batches
// of 4096-token sequences for the Qwen3-0.6B and 1.7B shapes (random weights), reporting tokens/s,
// MFU and device memory. A name ending in "xM" accumulates the gradients of M different
// micro-batches before the one optimizer step, as the trainer does for a mini-batch (and llm.c's
// MFU figures do): the AdamW pass over the weights is then shared by M micro-batches. Tokens/s and
// MFU count every micro-batch. A vocabTile runs the fused LM head (Options.VocabTile), for its step
// time and held memory beside the default chunked head's. T2_BENCH_SHAPES (comma-separated
// sub-benchmark names) narrows the set; T2_BENCH_ATTENTION sets Options.Attention (to compare
// kernels in one run: the records name the kernels that ran) and T2_BENCH_GEMM Options.GEMM (with
// "tuned", the algorithms it picked go to the log and $T2_REPORT_DIR/gemm-<name>.txt).
func BenchmarkTrainStep(b *testing.B) {
	info, err := Device(0)
	if err != nil {
		b.Skip(err)
	}
	for _, tc := range []struct {
		name      string
		cfg       gpu.Config
		tokens    int // per micro-batch
		recompute bool
		micro     int // micro-batches per optimizer step
		vocabTile int // Options.VocabTile (0: the chunked LM head)
	}{
		{"0.6B/16k", gpu.Qwen3_0_6B(), 16384, false, 1, 0},
		{"0.6B/32k", gpu.Qwen3_0_6B(), 32768, false, 1, 0},
		{"1.7B/16k", gpu.Qwen3_1_7B(), 16384, false, 1, 0},
		{"1.7B/16k-vocabtile16384", gpu.Qwen3_1_7B(), 16384, false, 1, 16384},
		{"1.7B/16kx4", gpu.Qwen3_1_7B(), 16384, false, 4, 0},
		{"1.7B/16kx8", gpu.Qwen3_1_7B(), 16384, false, 8, 0},
		{"1.7B/16k-recompute", gpu.Qwen3_1_7B(), 16384, true, 1, 0},
		{"1.7B/32k-recompute", gpu.Qwen3_1_7B(), 32768, true, 1, 0},
		{"1.7B/32k", gpu.Qwen3_1_7B(), 32768, false, 1, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if sel := os.Getenv("T2_BENCH_SHAPES"); sel != "" && !strings.Contains(","+sel+",", ","+tc.name+",") {
				b.Skip("not selected by T2_BENCH_SHAPES")
			}
			opt := DefaultOptions()
			opt.Recompute, opt.VocabTile = tc.recompute, tc.vocabTile
			if a := os.Getenv("T2_BENCH_ATTENTION"); a != "" {
				opt.Attention = a
			}
			if g := os.Getenv("T2_BENCH_GEMM"); g != "" {
				opt.GEMM = g
			}
			be, err := New(benchWeights(tc.cfg), opt)
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			rng := rand.New(rand.NewPCG(2, 2))
			mbs := make([]*gpu.MicroBatch, tc.micro)
			var flops float64
			for i := range mbs {
				mbs[i] = chains(rng, tc.cfg.VocabSize, tc.tokens/4096, 4096)
				flops += modelFlops(tc.cfg, mbs[i])
			}
			tokens := tc.tokens * tc.micro
			o := gpu.DefaultOptimizer()
			if _, _, err := be.Forward(mbs[0]); err != nil { // allocate; an OOM here is a result, not a crash
				saveRecord(b, benchRecord{Name: "go/" + tc.name, Device: info.Name, Tokens: tokens, Recompute: tc.recompute,
					VocabTile: tc.vocabTile, Note: err.Error()})
				b.Skipf("does not fit: %v", err)
			}
			be.haveForward = false
			trainStep(b, be, mbs, o) // warm-up
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				trainStep(b, be, mbs, o)
			}
			el := time.Since(start).Seconds() / float64(b.N)
			b.StopTimer()
			d, _ := Device(0)
			r := benchRecord{
				Name: "go/" + tc.name, Device: info.Name, Tokens: tokens, StepMS: el * 1e3,
				TokensPerSec: float64(tokens) / el, MFU: flops / el / peakBF16,
				HeldGB: float64(be.HeldBytes()) / 1e9, DeviceUsedGB: float64(d.TotalBytes-d.FreeBytes) / 1e9,
				Recompute: tc.recompute, VocabTile: tc.vocabTile, Attention: be.opt.Attention, GEMM: be.opt.GEMM,
			}
			b.ReportMetric(r.TokensPerSec, "tok/s")
			b.ReportMetric(100*r.MFU, "MFU%")
			b.ReportMetric(r.DeviceUsedGB, "devGB")
			b.ReportMetric(r.HeldGB, "heldGB")
			saveRecord(b, r)
			gemmPlans(b, be, "train-"+tc.name)
			profileStep(b, be, "train-"+tc.name, func() { trainStep(b, be, mbs, o) })
		})
	}
}

// gemmPlans writes the GEMM algorithms Options.GEMM "tuned" picked (nothing with "cublas") to the
// log and to $T2_REPORT_DIR/gemm-<name>.txt.
func gemmPlans(b *testing.B, be *Backend, name string) {
	rep, err := be.GEMMPlans()
	if err != nil {
		b.Fatal(err)
	}
	if rep == "" {
		return
	}
	b.Log("GEMM plans (" + name + "):\n" + rep)
	writeReport(b, "gemm-"+name, rep)
}

// writeReport writes text to $T2_REPORT_DIR/<name>.txt, the name's slashes and dots made
// underscores (no report directory: nothing).
func writeReport(b *testing.B, name, text string) {
	if dir := os.Getenv("T2_REPORT_DIR"); dir != "" {
		file := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(name)+".txt")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			b.Logf("report %s: %v", name, err)
		}
	}
}

// tau2Group builds one GRPO group shaped like a τ² episode batch: samples trajectories sharing a
// system prompt with tool schemas (prompt tokens), the first user turn (userTurn tokens), then
// unique tokens each.
func tau2Group(rng *rand.Rand, vocab, samples, prompt, userTurn, unique int) [][]int32 {
	shared := make([]int32, prompt+userTurn)
	for i := range shared {
		shared[i] = int32(rng.IntN(vocab))
	}
	seqs := make([][]int32, samples)
	for s := range seqs {
		seq := append([]int32(nil), shared...)
		for range unique {
			seq = append(seq, int32(rng.IntN(vocab)))
		}
		seqs[s] = seq
	}
	return seqs
}

// tau2CallGroup builds one GRPO group the way the trainer sees τ² rollouts with one sequence per
// policy LLM call (AReaL's "individual" export): samples conversations share a system prompt with
// tool schemas (prompt tokens); call c of a conversation is its prompt so far — the shared prefix
// plus c+1 turns of turn tokens (user or tool message, then the completion) — so each call's
// sequence extends the previous one and the group is one tree with a chain per conversation.
func tau2CallGroup(rng *rand.Rand, vocab, samples, calls, prompt, turn int) [][]int32 {
	shared := make([]int32, prompt)
	for i := range shared {
		shared[i] = int32(rng.IntN(vocab))
	}
	var seqs [][]int32
	for range samples {
		conv := append([]int32(nil), shared...)
		for range calls {
			for range turn {
				conv = append(conv, int32(rng.IntN(vocab)))
			}
			seqs = append(seqs, append([]int32(nil), conv...))
		}
	}
	return seqs
}

// BenchmarkTreePacked compares a training step over τ²-shaped GRPO groups packed as prefix trees
// with the same sequences unpacked (micro-batches of whole sequences up to the same token budget).
func BenchmarkTreePacked(b *testing.B) {
	info, err := Device(0)
	if err != nil {
		b.Skip(err)
	}
	cfg := gpu.Qwen3_0_6B()
	for _, tc := range []struct {
		name                              string
		samples, prompt, userTurn, unique int
		calls                             int // > 0: one sequence per LLM call (tau2CallGroup; userTurn is the turn size)
	}{
		{"0.6B/G16-prompt5000-unique1200", 16, 5000, 200, 1200, 0},
		{"0.6B/G8-prompt3000-unique2500", 8, 3000, 200, 2500, 0},
		{"0.6B/G8x8calls-prompt4000-turn300", 8, 4000, 300, 0, 8},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if sel := os.Getenv("T2_BENCH_SHAPES"); sel != "" && !strings.Contains(","+sel+",", ","+tc.name+",") {
				b.Skip("not selected by T2_BENCH_SHAPES")
			}
			rng := rand.New(rand.NewPCG(3, 3))
			var seqs [][]int32
			if tc.calls > 0 {
				seqs = tau2CallGroup(rng, cfg.VocabSize, tc.samples, tc.calls, tc.prompt, tc.userTurn)
			} else {
				seqs = tau2Group(rng, cfg.VocabSize, tc.samples, tc.prompt, tc.userTurn, tc.unique)
			}
			tree := buildTree(seqs).mb
			budget := max(tree.Len(), 4096)
			var flat []*gpu.MicroBatch
			for i := 0; i < len(seqs); {
				j, n := i, 0
				for j < len(seqs) && (j == i || n+len(seqs[j]) <= budget) {
					n += len(seqs[j])
					j++
				}
				flat = append(flat, unpack(seqs[i:j]).mb)
				i = j
			}
			be, err := New(benchWeights(cfg), DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			o := gpu.DefaultOptimizer()
			trainStep(b, be, []*gpu.MicroBatch{tree}, o)
			trainStep(b, be, flat, o)
			b.ResetTimer()
			var tTree, tFlat time.Duration
			for range b.N {
				s := time.Now()
				trainStep(b, be, []*gpu.MicroBatch{tree}, o)
				tTree += time.Since(s)
				s = time.Now()
				trainStep(b, be, flat, o)
				tFlat += time.Since(s)
			}
			b.StopTimer()
			treeMS := tTree.Seconds() * 1e3 / float64(b.N)
			flatMS := tFlat.Seconds() * 1e3 / float64(b.N)
			unpackedTokens := 0
			for _, s := range seqs {
				unpackedTokens += len(s)
			}
			b.ReportMetric(treeMS, "tree-ms")
			b.ReportMetric(flatMS, "unpacked-ms")
			b.ReportMetric(flatMS/treeMS, "speedup")
			b.ReportMetric(float64(unpackedTokens)/float64(tree.Len()), "token-ratio")
			saveRecord(b, benchRecord{
				Name: "go/tree/" + tc.name, Device: info.Name, Tokens: tree.Len(), StepMS: treeMS,
				TokensPerSec: float64(unpackedTokens) / (treeMS / 1e3), SpeedupVsFlat: flatMS / treeMS,
				HeldGB: float64(be.HeldBytes()) / 1e9,
				Note:   fmt.Sprintf("unpacked %d tokens in %d micro-batches: %.1f ms", unpackedTokens, len(flat), flatMS),
			})
		})
	}
}

// BenchmarkAttention times the tree-attention kernels alone (forward; backward including the
// rowsum(dO∘O) pass) for the Qwen3-1.7B attention shape (16 query heads, 8 KV heads, head_dim 128),
// FA2 against the WMMA kernels and, on H100/H200, the wgmma ones ("hopper"), on 16k tokens of
// 4096-token chains and on a τ²-shaped prefix tree.
// TFLOP/s counts 4·d per visible (query, key) pair and head forward, 10·d backward (the dQ pass's
// recomputation of S and dP is not counted).
func BenchmarkAttention(b *testing.B) {
	info, err := Device(0)
	if err != nil {
		b.Skip(err)
	}
	cfg := gpu.Qwen3_1_7B()
	nh, nkv, d := cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim
	rng := rand.New(rand.NewPCG(4, 4))
	for _, tc := range []struct {
		name string
		mb   *gpu.MicroBatch
	}{
		{"1.7B/chains16k", chains(rng, 100, 4, 4096)},
		{"1.7B/tree-G16-prompt5000-unique1200", buildTree(tau2Group(rng, 1000, 16, 5000, 200, 1200)).mb},
	} {
		in := newAttnProblem(rng, tc.mb, nh, nkv, d)
		var pairs float64
		for _, p := range tc.mb.Positions {
			pairs += float64(p) + 1
		}
		for _, impl := range attentionImpls(info) {
			b.Run(tc.name+"/"+impl, func(b *testing.B) {
				var res *attnOutputs
				for range b.N {
					if res, err = runAttention(in, impl, 9); err != nil {
						b.Fatal(err)
					}
				}
				fwdTF := 4 * float64(d*nh) * pairs / (res.fwdMS * 1e-3) / 1e12
				bwdTF := 10 * float64(d*nh) * pairs / (res.bwdMS * 1e-3) / 1e12
				b.ReportMetric(res.fwdMS, "fwd-ms")
				b.ReportMetric(res.bwdMS, "bwd-ms")
				b.ReportMetric(fwdTF, "fwd-TFLOP/s")
				b.ReportMetric(bwdTF, "bwd-TFLOP/s")
				saveRecord(b, benchRecord{
					Name: "go/attention/" + tc.name + "/" + impl, Device: info.Name, Tokens: tc.mb.Len(),
					StepMS: res.fwdMS + res.bwdMS,
					Note:   fmt.Sprintf("fwd %.3f ms (%.0f TFLOP/s), bwd %.3f ms (%.0f TFLOP/s)", res.fwdMS, fwdTF, res.bwdMS, bwdTF),
				})
			})
		}
	}
}

// profileStep runs step once more with the per-operation profiler on when T2_PROFILE is set, and
// writes the table (operation, launches, device ms, share of the profiled time) to the log and to
// $T2_REPORT_DIR/profile-<name>.txt.
func profileStep(b *testing.B, be *Backend, name string, step func()) {
	if os.Getenv("T2_PROFILE") == "" {
		return
	}
	if err := be.SetProfiling(true); err != nil {
		b.Fatal(err)
	}
	step()
	ops := be.Profile()
	if err := be.SetProfiling(false); err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, op := range ops {
		total += op.MS
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-40s %6s %10s %6s\n", "operation ("+name+")", "calls", "ms", "share")
	for _, op := range ops {
		fmt.Fprintf(&sb, "%-40s %6d %10.3f %5.1f%%\n", op.Op, op.Calls, op.MS, 100*op.MS/total)
	}
	fmt.Fprintf(&sb, "%-40s %6s %10.3f\n", "total", "", total)
	b.Log("\n" + sb.String())
	writeReport(b, "profile-"+name, sb.String())
}
