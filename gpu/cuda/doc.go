// Package cuda is the NVIDIA GPU implementation of gpu.Backend: a Qwen3 dense causal LM trained in
// bf16 with fp32 master weights, over packed prefix-tree micro-batches, through cgo and CUDA; and
// of gpu.Decoder (decoder.go), the sampler's forward pass over a paged KV cache.
//
// Everything that touches cgo or CUDA sits behind the `cuda` build tag, so `go build ./...` and
// `go vet ./...` without the tag compile only this file and options.go (no C toolchain, no CUDA).
// Build the kernels first (`make gpu`, which runs nvcc over csrc/ into build/libt2cuda.a), then
// `go test -tags cuda ./gpu/cuda/`. gpu/cpu is the pure-Go reference with the same functions.
//
// Layout, llm.c style: csrc/ holds one .cu file per concern behind a C ABI (csrc/t2cuda.h) whose
// functions return a status naming the failing call and its source line, so every CUDA and cuBLAS
// error reaches Go as an error, never an exit:
//
//	context.cu     device, memory, copies, cuBLAS handle, events
//	matmul.cu      linear layer GEMMs: bf16 operands, fp32 accumulation, fp32 weight gradients
//	gemm.cu        how every GEMM runs (Options.GEMM): cublasGemmEx, or cuBLASLt with the fastest
//	               of its candidate algorithms timed per shape bucket at first use
//	norm.cu        RMSNorm (+ residual) and per-head q/k RMSNorm + rotate-half RoPE, fwd/bwd
//	attention.cu   tree attention entry points (mask j ≤ i ≤ SubtreeEnd[j]) and the first, WMMA kernels
//	attention_fa2.cu  the FlashAttention-2-style kernels (the default off Hopper): mma.sync, tiles in
//	               registers, cp.async, dQ by fp32 atomics (or a deterministic separate pass)
//	attention_sm90_fwd.cu, attention_sm90_bwd.cu  the Hopper kernels (Options.Attention "hopper",
//	               chosen by "auto" on H100/H200): warpgroup MMA (wgmma.cuh) on tiles that TMA
//	               and mbarriers (tma.cuh) bring in; the forward warp-specialized (a producer
//	               warpgroup, two consumers in ping-pong); tile.cuh: what the attention files share
//	elementwise.cu embedding, SwiGLU, residual add, conversions (vec.cuh: 16-byte bf16 vectors)
//	logprob.cu     chunked log-softmax gather + entropy over the vocabulary, and its backward, run
//	               only on head rows (parents of nodes gpu.MicroBatch.Score marks), gathered densely;
//	               or vocabulary tile by tile (fusedhead.go, Options.VocabTile), no full logits
//	adamw.cu       global gradient norm, clipping, AdamW on fp32 masters with bf16 copies
//	paged_attention.cu  serving: new K/V into a paged cache, split-K attention over cached context
//	               merged with FA2 over the step's tokens
//	sample.cu      serving: gpu.SampleLogits on the device (greedy, temperature, top-k/p, min-p)
//
// The Go side (backend.go, layer.go) owns the parameter layout (one flat buffer per kind: fp32
// master, bf16 copy, fp32 gradient, AdamW m and v, in gpu.ParamSpecs order so q/k/v and gate/up
// are contiguous and run as one fused GEMM each), the activations, and the layer loop with
// optional activation recomputation. Backend.SetProfiling times every launch between CUDA events
// (profile.go), which is how gpu/cuda/NOTES.md's per-operation breakdowns are measured.
package cuda
