package gpu

import (
	"fmt"
	"math"
)

// This file is the contract between the sampler's engine (gpu/sampler: scheduler, paged KV-cache
// manager, prefix cache, HTTP) and the backends that run a Qwen3 forward pass for serving
// (gpu/cpu and gpu/cuda). The engine owns every decision — which sequences run, which cache blocks
// they use, which blocks are shared through the prefix cache — and a Decoder only computes: it
// writes the new tokens' keys and values into the physical blocks it is told to, attends over the
// blocks of each sequence's table, and samples one token where asked.
//
// The KV cache is paged (vLLM's design): a pool of NumBlocks blocks of BlockSize token slots per
// layer; a sequence's block table maps its logical block b (positions [b·BlockSize,
// (b+1)·BlockSize)) to a physical block. Blocks are shared read-only between sequences that share
// a prefix (SGLang's RadixAttention, at block granularity); the engine never asks a Decoder to
// write into a block another live sequence reads, so no copy-on-write is needed in the backend.

// KVCacheSpec is the geometry of a Decoder's paged KV cache.
type KVCacheSpec struct {
	BlockSize int // token slots per block (a power of two; 16 by default)
	NumBlocks int // blocks in the pool, shared by all sequences
}

// Tokens is the number of token slots in the pool.
func (s KVCacheSpec) Tokens() int { return s.BlockSize * s.NumBlocks }

// KVBytesPerToken is the KV-cache memory one token slot takes over all layers at the given element
// size (2 for bf16): keys and values of every KV head.
func (c Config) KVBytesPerToken(elemBytes int) int64 {
	return int64(c.NumHiddenLayers) * 2 * int64(c.KVDim()) * int64(elemBytes)
}

// SampleParams are one request's sampling settings, as the sampler's HTTP layer validated them.
type SampleParams struct {
	// Temperature divides the logits; 0 means greedy (argmax, ties to the lowest token id).
	Temperature float32
	// TopP keeps the most probable tokens whose mass reaches TopP (1 = off).
	TopP float32
	// TopK keeps the TopK most probable tokens (≤ 0 = off).
	TopK int32
	// MinP keeps tokens whose probability is at least MinP times the largest (0 = off).
	MinP float32
}

// Validate reports settings no sampler can honour.
func (p SampleParams) Validate() error {
	switch {
	case !(p.Temperature >= 0) || math.IsInf(float64(p.Temperature), 0):
		return fmt.Errorf("temperature %v must be a finite number ≥ 0", p.Temperature)
	case !(p.TopP > 0 && p.TopP <= 1):
		return fmt.Errorf("top_p %v must be in (0, 1]", p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return fmt.Errorf("min_p %v must be in [0, 1]", p.MinP)
	}
	return nil
}

// Greedy reports whether the parameters pick the argmax.
func (p SampleParams) Greedy() bool { return p.Temperature == 0 }

// ServeSeq is one sequence's share of a Decoder step: a prefill chunk or one decode token.
type ServeSeq struct {
	// Tokens are the new tokens, at positions Start, Start+1, …; their keys and values are written
	// into the cache and they attend to every cached position < their own plus themselves.
	Tokens []int32
	// Start is the number of positions of this sequence already in the cache (its context length
	// before this step). Positions [0, Start) must have been written by earlier steps (of this
	// sequence or, for prefix-cached blocks, of another).
	Start int
	// Blocks is the block table: Blocks[b] holds positions [b·BlockSize, (b+1)·BlockSize). It must
	// cover Start+len(Tokens) positions.
	Blocks []int32
	// Sample asks for a next token after the last new token (false for a prefill chunk that is not
	// the prompt's last).
	Sample bool
	// Params and Uniform drive the draw when Sample is set. Uniform is in [0, 1), drawn by the
	// engine from the request's own seeded stream, so a request's output does not depend on what
	// else runs in the batch.
	Params  SampleParams
	Uniform float64
}

// Sampled is the token a Decoder drew for a sequence and its log-probability.
type Sampled struct {
	Token int32
	// LogProb is log softmax(logits / T)[Token] in fp32 over the whole vocabulary (T = Temperature,
	// or 1 when greedy), before top-k/top-p/min-p filtering: at T = 1 it is exactly the quantity the
	// trainer's Backend.LogProbs computes for the same token, the behaviour log-prob of the
	// decoupled PPO loss.
	LogProb float32
}

// Decoder is a Qwen3 forward pass over a paged KV cache, driven by the sampler's engine. It is
// not safe for concurrent use: the engine drives it from one goroutine.
type Decoder interface {
	// Config returns the model configuration.
	Config() Config
	// KVSpec returns the cache geometry the decoder was built with.
	KVSpec() KVCacheSpec
	// Step runs the sequences as one batch. It returns one Sampled per sequence with Sample set,
	// in order; other sequences have no entry. A malformed step (token outside the vocabulary,
	// block id outside the pool, a table too short, position past MaxPositionEmbeddings) is an
	// error that writes nothing.
	Step(seqs []ServeSeq) ([]Sampled, error)
	// LoadWeights replaces the weights in place. The config must equal Config(); on error the old
	// weights keep serving. The KV cache's contents are stale afterwards (the engine drops or
	// recomputes them, per its policy).
	LoadWeights(w *Weights) error
	// Close releases the decoder's memory.
	Close() error
}

// ValidateServeStep checks a step against a decoder's geometry before any backend touches memory.
func ValidateServeStep(cfg Config, kv KVCacheSpec, seqs []ServeSeq) error {
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			return fmt.Errorf("gpu: serve step: sequence %d has no new tokens", i)
		}
		if s.Start < 0 {
			return fmt.Errorf("gpu: serve step: sequence %d: negative start %d", i, s.Start)
		}
		end := s.Start + len(s.Tokens)
		if cfg.MaxPositionEmbeddings > 0 && end > cfg.MaxPositionEmbeddings {
			return fmt.Errorf("gpu: serve step: sequence %d reaches position %d past max_position_embeddings %d", i, end, cfg.MaxPositionEmbeddings)
		}
		if need := (end + kv.BlockSize - 1) / kv.BlockSize; len(s.Blocks) < need {
			return fmt.Errorf("gpu: serve step: sequence %d: %d blocks cover fewer than its %d positions", i, len(s.Blocks), end)
		}
		for _, b := range s.Blocks {
			if b < 0 || int(b) >= kv.NumBlocks {
				return fmt.Errorf("gpu: serve step: sequence %d: block %d outside the pool [0,%d)", i, b, kv.NumBlocks)
			}
		}
		for _, t := range s.Tokens {
			if t < 0 || int(t) >= cfg.VocabSize {
				return fmt.Errorf("gpu: serve step: sequence %d: token %d outside vocabulary [0,%d)", i, t, cfg.VocabSize)
			}
		}
		if s.Sample {
			if err := s.Params.Validate(); err != nil {
				return fmt.Errorf("gpu: serve step: sequence %d: %w", i, err)
			}
			if !(s.Uniform >= 0 && s.Uniform < 1) {
				return fmt.Errorf("gpu: serve step: sequence %d: uniform draw %v outside [0,1)", i, s.Uniform)
			}
		}
	}
	return nil
}

// Validate checks the geometry.
func (s KVCacheSpec) Validate() error {
	if s.BlockSize <= 0 || s.BlockSize&(s.BlockSize-1) != 0 || s.BlockSize > 256 {
		return fmt.Errorf("%w: block size %d must be a power of two in [1,256]", ErrKVGeometry, s.BlockSize)
	}
	if s.NumBlocks <= 0 {
		return fmt.Errorf("%w: %d blocks", ErrKVGeometry, s.NumBlocks)
	}
	return nil
}
