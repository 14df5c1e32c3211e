package cuda

import (
	"fmt"
	"slices"
	"strings"
)

// Options tunes the CUDA backend. They change speed and memory, never the numbers computed
// (up to floating-point summation order).
type Options struct {
	// Device is the CUDA device ordinal; default 0.
	Device int `yaml:"device"`
	// Recompute keeps only each layer's input during Forward and recomputes the layer's
	// activations during Backward (about one extra forward pass of compute), so long micro-batches
	// fit: the 1.7B shape at 32k tokens needs it on an 80 GB card. Default false.
	Recompute bool `yaml:"recompute"`
	// LogitChunk is the number of head rows (nodes whose next-token distribution the loss needs)
	// whose bf16 logits (vocab_size wide) exist at once in the log-prob computation. When a
	// micro-batch's head rows fit one chunk, Backward reuses Forward's logits instead of recomputing
	// them (one LM-head GEMM fewer, ~3% of a 1.7B step); more rows are processed chunk by chunk and
	// recomputed. Default 16384: 5 GB for Qwen3's 151,936-token vocabulary, allocated only up to the
	// largest micro-batch seen.
	LogitChunk int `yaml:"logit_chunk"`
	// VocabTile > 0 runs the fused LM head (fusedhead.go): for each chunk of head rows the logits
	// are computed VocabTile vocabulary columns at a time and folded into per-row running
	// log-sum-exp and entropy sums, so the [chunk, vocab_size] logits never exist; Backward
	// recomputes each tile, turns it into its gradient and accumulates the input gradient (fp32)
	// and the LM-head weight gradient tile by tile. It trades time for memory: the logits buffer
	// (5 GB at 16k head rows for Qwen3's vocabulary) shrinks to one [chunk, VocabTile] bf16 tile
	// plus an fp32 [chunk, hidden_size] input gradient, at the cost of recomputing the logits in
	// Backward (one more LM-head GEMM, ~3% of a 1.7B 16k-token step, which the chunked path saves
	// by keeping Forward's logits when they fit one chunk) and of running the head as several
	// narrower GEMMs. 0, the default, keeps the chunked path, the faster one whenever its logits
	// fit. Must be a multiple of 8: a tile's rows are VocabTile bf16 wide, and a multiple of 8
	// keeps every row 16-byte aligned for the log-prob kernels' vector paths (only the last tile,
	// vocab_size mod VocabTile wide, may be narrower and run the scalar ones).
	VocabTile int `yaml:"vocab_tile"`
	// Attention picks the tree-attention kernels: "fa2" (FlashAttention-2 style: mma.sync with the
	// score and accumulator tiles in registers, cp.async double buffering, dQ accumulated with fp32
	// atomics), "fa2-deterministic" (the same forward; a backward about a third slower,
	// with a separate dQ pass recomputing the scores, whose gradients are the same bits on every run)
	// "wmma" (the first kernels, WMMA with every tile staged through shared memory; slower, kept
	// as a cross-check and fallback), "hopper" (forward and backward on Hopper's warpgroup MMA,
	// wgmma, fed by TMA, csrc/attention_sm90_*.cu; dQ summed with TMA reductions, in an order
	// that varies from run to run as "fa2"'s atomics do; H100/H200 and kernels built for sm_90a
	// only) or "auto" ("hopper" where the device and the kernel build allow it, else "fa2"). All
	// compute the same function. Empty means "auto".
	Attention string `yaml:"attention"`
	// GEMM picks how the linear layers' matrix products run: "cublas" (cublasGemmEx: cuBLAS's
	// heuristic choice for each call, the same algorithm and bits on every run) or "tuned"
	// (cuBLASLt: at the first product of each shape, up to eight of cuBLASLt's candidate
	// algorithms are timed on the real operands and the fastest is kept; token counts a few
	// percent apart share one choice, csrc/gemm.cu). Each new shape costs its candidates' trial
	// runs once per process (up to 32 times the GEMM's own time; the large ones 16), and the
	// algorithm kept, hence the summation order and the last bits, may differ between runs.
	// Empty means "cublas".
	GEMM string `yaml:"gemm"`
}

// The values of Options.GEMM.
const (
	GEMMCublas = "cublas"
	GEMMTuned  = "tuned"
)

// The values of Options.Attention.
const (
	AttentionFA2    = "fa2"
	AttentionFA2Det = "fa2-deterministic"
	AttentionWMMA   = "wmma"
	AttentionHopper = "hopper"
	AttentionAuto   = "auto"
)

// attentionNames lists the accepted Options.Attention values, for Validate's message.
var attentionNames = []string{AttentionAuto, AttentionFA2, AttentionFA2Det, AttentionWMMA, AttentionHopper}

// DefaultOptions returns device 0, no recomputation, 16384-row logit chunks, the chunked (not
// vocabulary-tiled) LM head, "auto" attention kernels (the wgmma forward on H100/H200, FA2
// elsewhere) and cublasGemmEx's own algorithm choices.
func DefaultOptions() Options {
	return Options{Device: 0, Recompute: false, LogitChunk: 16384, Attention: AttentionAuto, GEMM: GEMMCublas}
}

// Validate reports options the backend cannot run with.
func (o Options) Validate() error {
	if o.Device < 0 {
		return fmt.Errorf("cuda: options device %d must be ≥ 0", o.Device)
	}
	if o.LogitChunk <= 0 {
		return fmt.Errorf("cuda: options logit_chunk %d must be > 0", o.LogitChunk)
	}
	if o.VocabTile < 0 || o.VocabTile%8 != 0 {
		return fmt.Errorf("cuda: options vocab_tile %d must be 0 (the chunked LM head) or a positive multiple of 8 "+
			"(each tile row of bf16 logits must stay 16-byte aligned for the vectorized log-prob kernels)", o.VocabTile)
	}
	if o.Attention != "" && !slices.Contains(attentionNames, o.Attention) {
		return fmt.Errorf("cuda: options attention %q: want one of %s", o.Attention, strings.Join(attentionNames, ", "))
	}
	if o.GEMM != "" && o.GEMM != GEMMCublas && o.GEMM != GEMMTuned {
		return fmt.Errorf("cuda: options gemm %q: want %s or %s", o.GEMM, GEMMCublas, GEMMTuned)
	}
	return nil
}
