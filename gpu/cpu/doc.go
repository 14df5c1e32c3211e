// Package cpu is the pure-Go fp32 reference implementation of gpu.Backend: a Qwen3 dense causal LM
// computed exactly as Hugging Face transformers computes it, over packed prefix-tree micro-batches,
// with its backward pass and torch-semantics AdamW.
//
// It is the correctness oracle for gpu/cuda and the backend CI and laptops train with, so clarity
// comes first. Like llm.c's CPU reference it is organised one file per operation, each with a
// forward and a backward function and its own finite-difference test:
//
//	embedding.go  embeddingForward, embeddingBackward       token rows of model.embed_tokens
//	rmsnorm.go    rmsnormForward, rmsnormBackward           x·rsqrt(mean(x²)+eps)·w over rows
//	qknorm.go     qkNormForward, qkNormBackward             rmsnorm per attention head (q_norm, k_norm)
//	rope.go       ropeForward, ropeBackward, ropeTables     rotate-half RoPE at tree-depth positions
//	matmul.go     matmulForward, matmulBackward             y = x·Wᵀ for torch [out,in] weights
//	attention.go  attentionForward, attentionBackward       GQA attention under the tree mask
//	swiglu.go     swigluForward, swigluBackward             silu(gate)·up
//	residual.go   residualForward, residualBackward         the residual stream
//	logprob.go    logprobForward, logprobBackward           lm_head + log-softmax gather + entropy,
//	                                                        chunked over the vocabulary
//	adamw.go      globalNorm, clipScale, adamwUpdate        gradient clipping and AdamW
//	model.go      model.forward, model.backward             the layer loop
//	backend.go    Backend (gpu.Backend), New, Load, NewRandom
//
// Every operation is generic over float32 and float64: the backend runs float32 (what the GPU's
// master weights are), and the tests run the very same code in float64 to check gradients
// against central finite differences tightly.
//
// Conventions (as llm.c): parameter gradients accumulate (+=) across micro-batches; activation
// gradients also accumulate (+=) into buffers the caller zeroes, because several consumers (q, k
// and v projections of one normalized input) feed one gradient.
package cpu
