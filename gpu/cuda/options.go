package cuda

import "fmt"

// Options tunes the CUDA backend. They change speed and memory, never the numbers computed
// (up to floating-point summation order).
type Options struct {
	// Device is the CUDA device ordinal; default 0.
	Device int `yaml:"device"`
	// Recompute keeps only each layer's input during Forward and recomputes the layer's
	// activations during Backward (about one extra forward pass of compute), so long micro-batches
	// fit: the 1.7B shape at 32k tokens needs it on an 80 GB card. Default false.
	Recompute bool `yaml:"recompute"`
	// LogitChunk is the number of token rows whose bf16 logits (vocab_size wide) exist at once in the
	// log-prob computation; default 4096 (1.2 GB for Qwen3's 151,936-token vocabulary).
	LogitChunk int `yaml:"logit_chunk"`
	// Attention picks the tree-attention kernels: "fa2" (FlashAttention-2 style: mma.sync with the
	// score and accumulator tiles in registers, cp.async double buffering; the default) or "wmma"
	// (the first kernels, WMMA with every tile staged through shared memory; slower, kept as a
	// cross-check and fallback). Both compute the same function. Empty means "fa2".
	Attention string `yaml:"attention"`
}

// The values of Options.Attention.
const (
	AttentionFA2  = "fa2"
	AttentionWMMA = "wmma"
)

// DefaultOptions returns device 0, no recomputation, 4096-row logit chunks, the FA2 attention
// kernels.
func DefaultOptions() Options {
	return Options{Device: 0, Recompute: false, LogitChunk: 4096, Attention: AttentionFA2}
}

// Validate reports options the backend cannot run with.
func (o Options) Validate() error {
	if o.Device < 0 {
		return fmt.Errorf("cuda: options device %d must be ≥ 0", o.Device)
	}
	if o.LogitChunk <= 0 {
		return fmt.Errorf("cuda: options logit_chunk %d must be > 0", o.LogitChunk)
	}
	if o.Attention != "" && o.Attention != AttentionFA2 && o.Attention != AttentionWMMA {
		return fmt.Errorf("cuda: options attention %q: want %q or %q", o.Attention, AttentionFA2, AttentionWMMA)
	}
	return nil
}
