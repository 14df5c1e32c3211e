/*
 * t2cuda.h: the C ABI between the Go package tau2rl/gpu/cuda and its CUDA kernels.
 *
 * Every function returns a t2_status. On failure it names the failing call, the source file and
 * line, and the CUDA/cuBLAS message; all strings are static, so Go can copy them at leisure and no
 * thread-local "last error" is needed (a goroutine may move between OS threads between cgo calls).
 * Launch functions check cudaGetLastError() right after the launch; asynchronous faults surface at
 * the next t2_sync (the Go side synchronizes once per Forward/Backward/Step).
 *
 * Layout conventions (llm.c style, row-major): activations are [N, C] with N tokens; linear weights
 * are Hugging Face's [out, in]; bf16 = __nv_bfloat16 passed as void* so cgo needs no CUDA headers.
 *
 * defines: t2_* in context.cu, matmul.cu, norm.cu, attention.cu (+ attention_fa2.cu, attention_sm90_*.cu),
 *          elementwise.cu, logprob.cu, adamw.cu, paged_attention.cu, sample.cu, ipc.cu
 */
#ifndef T2CUDA_H
#define T2CUDA_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int code;          /* 0 on success; a cudaError_t or cublasStatus_t value otherwise */
    const char *call;  /* the failing expression, as written */
    const char *file;
    int line;
    const char *msg;   /* the library's description of code */
} t2_status;

/* ---- context.cu: device, memory, streams, cuBLAS handle ---- */
t2_status t2_init(int device, void **ctx);            /* sets the device, creates the cuBLAS handle + workspace */
t2_status t2_destroy(void *ctx);
t2_status t2_set_device(int device);
t2_status t2_malloc(void **p, size_t bytes);
t2_status t2_free(void *p);
t2_status t2_memset(void *p, int value, size_t bytes);
t2_status t2_h2d(void *dst, const void *src, size_t bytes);
t2_status t2_d2h(void *dst, const void *src, size_t bytes);
t2_status t2_d2d(void *dst, const void *src, size_t bytes);
t2_status t2_sync(void);
t2_status t2_mem_info(size_t *free_bytes, size_t *total_bytes);
t2_status t2_device_name(int device, char *buf, int len, int *sms);
t2_status t2_device_count(int *n);                     /* visible CUDA devices (0 when none) */
t2_status t2_event_time(void *ctx, int record, float *ms); /* record=1: start; record=0: stop and read ms */
/* profiler events: create, record on the default stream, elapsed ms between two (waits for stop) */
t2_status t2_event_create(void **ev);
t2_status t2_event_destroy(void *ev);
t2_status t2_event_record(void *ev);
t2_status t2_event_elapsed(void *start, void *stop, float *ms);
/* streams and CUDA graphs: t2_use_stream makes every launch (and ctx's cuBLAS, when ctx is set) go
 * to stream s (NULL: the legacy default stream, the trainer's); t2_graph_begin/end capture what is
 * launched on s in between into an executable graph (relaxed mode); t2_graph_abort ends a failed
 * capture. */
t2_status t2_stream_create(void **s);
t2_status t2_stream_destroy(void *s);
t2_status t2_use_stream(void *ctx, void *s);
t2_status t2_graph_begin(void *s);
t2_status t2_graph_end(void *s, void **exec);
t2_status t2_graph_abort(void *s);
t2_status t2_graph_launch(void *exec, void *s);
t2_status t2_graph_destroy(void *exec);

/* ---- ipc.cu: device memory shared with another process on the same GPU (weights to a sampler) ---- */
#define T2_IPC_HANDLE_BYTES 64 /* sizeof(cudaIpcMemHandle_t) */
/* handle (T2_IPC_HANDLE_BYTES bytes) of the allocation that starts at p (a t2_malloc'd pointer) */
t2_status t2_ipc_get_handle(const void *p, unsigned char *handle);
/* maps another process's allocation into this one (*p = its start); not in the exporting process */
t2_status t2_ipc_open(const unsigned char *handle, void **p);
t2_status t2_ipc_close(void *p);                         /* unmaps what t2_ipc_open mapped */
t2_status t2_device_uuid(int device, unsigned char *uuid); /* 16 bytes, nvidia-smi's GPU-… UUID */

/* ---- gemm.cu: how the GEMMs run (Options.GEMM) ---- */
#define T2_GEMM_CUBLAS 0 /* cublasGemmEx: cuBLAS's heuristic choice, the same bits every run (default) */
#define T2_GEMM_TUNED 1  /* cuBLASLt: the fastest of its candidates, timed at each shape's first use */
t2_status t2_set_gemm(void *ctx, int mode);
/* t2_gemm_report writes one line per tuned plan (shape, calls, the pick and its time against
 * cuBLASLt's first candidate, the algorithm's configuration) into buf; *len is the text's length. */
t2_status t2_gemm_report(void *ctx, char *buf, int cap, int *len);

/* ---- matmul.cu: bf16 GEMMs with fp32 accumulation (cuBLAS) ---- */
/* y[n,out] = x[n,in] · w[out,in]^T  (bf16 out) */
t2_status t2_linear_fwd(void *ctx, void *y, const void *x, const void *w, int n, int in, int out);
/* dx[n,in] = dy[n,out] · w[out,in]  (bf16 out; beta=0) */
t2_status t2_linear_bwd_x(void *ctx, void *dx, const void *dy, const void *w, int n, int in, int out);
/* dx[n,in] (fp32) = dy[n,out] · w[out,in] + beta·dx  (beta 0 overwrites, 1 accumulates: the fused
 * LM head sums its vocabulary tiles' input gradients in fp32) */
t2_status t2_linear_bwd_x_f32(void *ctx, float *dx, const void *dy, const void *w, int n, int in, int out,
                              float beta);
/* dw[out,in] (fp32) = dy[n,out]^T · x[n,in] + beta·dw  (1 accumulates; 0 overwrites: the first
 * write after an optimizer step) */
t2_status t2_linear_bwd_w(void *ctx, float *dw, const void *dy, const void *x, int n, int in, int out, float beta);

/* ---- norm.cu: RMSNorm (residual-fused) and per-head q/k RMSNorm + rotate-half RoPE ---- */
/* resid_out = x + delta (bf16; delta may be NULL, then resid_out may be NULL too and x is used);
 * out = w * bf16(x̂), x̂ = r·rsqrt(mean(r²)+eps) in fp32; rstd[n] saved for the backward pass. */
t2_status t2_rmsnorm_fwd(void *out, void *resid_out, float *rstd, const void *x, const void *delta,
                         const void *w, int n, int c, float eps);
/* dresid[n,c] (fp32) += rmsnorm backward of dout; dw (fp32) += Σ dout·bf16(x̂);
 * dresid_bf16 (optional) receives a bf16 copy of the updated dresid for the next GEMM. */
t2_status t2_rmsnorm_bwd(float *dresid, void *dresid_bf16, float *dw, const void *dout, const void *x,
                         const float *rstd, const void *w, int n, int c);
/* For each token t and head h of the qkv buffer [n, (nh+2nkv)·d]: q and k heads are RMS-normalized
 * over d (weights qw, kw [d]) then rotated by RoPE at positions[t] (theta); results go to
 * qout [n, nh·d] and kout [n, nkv·d]; rstd_q [n·nh], rstd_k [n·nkv] are saved. */
t2_status t2_qknorm_rope_fwd(void *qout, void *kout, float *rstd_q, float *rstd_k, const void *qkv,
                             const void *qw, const void *kw, const int32_t *positions, int n, int nh,
                             int nkv, int d, float eps, float theta);
/* Backward of t2_qknorm_rope_fwd: dq [n,nh·d] (fp32, as t2_attention_bwd leaves it; rounded to bf16
 * on load, as transformers' bf16 gradient is), dk [n,nkv·d] (bf16) → the q and k column blocks of
 * dqkv (bf16); dqw, dkw (fp32) accumulate. */
t2_status t2_qknorm_rope_bwd(void *dqkv, float *dqw, float *dkw, const float *dq, const void *dk,
                             const void *qkv, const float *rstd_q, const float *rstd_k, const void *qw,
                             const void *kw, const int32_t *positions, int n, int nh, int nkv, int d,
                             float theta);

/* ---- attention.cu: flash-style tree attention (mask j ≤ i ≤ subtree_end[j], no N×N matrix) ---- */
/* q [n, q_stride] (head h at column h·d), k [n, k_stride], v [n, v_stride] (kv head g at g·d);
 * out [n, nh·d] bf16; lse [nh, n] fp32: base-2 log of the softmax denominator of the scores scaled
 * by log2(e)/sqrt(d) (what the backward pass needs). blockmax (t2_tree_blockmax, sized by
 * t2_tree_blockmax_bytes): the max subtree_end over each 64-key block, then the min, then the
 * Hopper kernels' launch orders of their 128-row blocks (forward, backward; longest first); the
 * max skips key blocks no query of a tile can see, the min finds tiles every query sees whole (no
 * per-element mask).
 * impl picks the kernels: T2_ATT_FA2 (mma.sync fragments in registers, dQ accumulated with fp32
 * atomics), T2_ATT_FA2_DET (the same forward; a backward with a separate dQ pass that
 * gives the same bits every run), T2_ATT_WMMA (the first kernels, WMMA through shared memory; kept
 * as a reference and fallback; deterministic) or T2_ATT_HOPPER (forward and backward on Hopper's
 * warpgroup MMA fed by TMA, attention_sm90_fwd.cu / _bwd.cu, dQ added by TMA reductions; only
 * where t2_attention_sm90_available). */
#define T2_ATT_FA2 0
#define T2_ATT_WMMA 1
#define T2_ATT_FA2_DET 2
#define T2_ATT_HOPPER 3
/* *available = 1 when the current device has compute capability 9.x and this library's kernels were
 * built for sm_90a (wgmma), else 0. */
t2_status t2_attention_sm90_available(int *available);
t2_status t2_tree_blockmax(int32_t *blockmax, const int32_t *subtree_end, int n);
size_t t2_tree_blockmax_bytes(int n);
t2_status t2_attention_fwd(void *out, float *lse, const void *q, const void *k, const void *v, int q_stride,
                           int k_stride, int v_stride, const int32_t *subtree_end, const int32_t *blockmax,
                           int n, int nh, int nkv, int d, int impl);
/* dq [n, nh·d] fp32 (overwritten; fp32 because the atomic dQ sums there, and the q/k-norm backward
 * reads it as is); dk and dv rows of dk_stride / dv_stride with kv head g at column g·d (bf16,
 * overwritten); scratch_d [nh, n] fp32 receives rowsum(dout∘out); scratch_bf16 [n, nh·d] bf16 holds
 * the WMMA kernels' dq before it is widened (required by T2_ATT_WMMA, may be NULL otherwise). */
t2_status t2_attention_bwd(float *dq, void *dk, int dk_stride, void *dv, int dv_stride, float *scratch_d,
                           void *scratch_bf16, const void *dout, const void *out, const float *lse, const void *q,
                           const void *k, const void *v, int q_stride, int k_stride, int v_stride,
                           const int32_t *subtree_end, const int32_t *blockmax, int n, int nh, int nkv, int d,
                           int impl);

/* ---- elementwise.cu ---- */
t2_status t2_embedding_fwd(void *out, const int32_t *tokens, const void *table, int n, int c);
t2_status t2_embedding_bwd(float *dtable, const int32_t *tokens, const float *dout, int n, int c);
/* gu [n, 2i]: gate columns [0,i), up columns [i,2i); h = bf16(silu(gate)) * up */
t2_status t2_swiglu_fwd(void *h, const void *gu, int n, int i);
t2_status t2_swiglu_bwd(void *dgu, const void *dh, const void *gu, int n, int i);
/* out = bf16(a + b) elementwise (the residual add that closes the serving decoder's last layer; the
 * training step folds it into the next RMSNorm, t2_rmsnorm_fwd with a delta) */
t2_status t2_add_bf16(void *out, const void *a, const void *b, size_t count);
t2_status t2_f32_to_bf16(void *dst, const float *src, size_t count);
/* t2_zero_spans zeroes count spans of base: span i is [spans[2i], spans[2i]+spans[2i+1]) elements
 * (spans in device memory). One launch for the many small gradient tensors that kernels accumulate
 * into (the norms' weights), which a first write cannot overwrite the way a GEMM's beta = 0 can. */
t2_status t2_zero_spans(float *base, const int64_t *spans, int count);
t2_status t2_bf16_to_f32(float *dst, const void *src, size_t count);

/* ---- logprob.cu: chunked (or vocabulary-tiled) log-softmax gather + entropy over the vocabulary ---- */
/* Head rows are the nodes that parent at least one scored node, in node order (R of them); the
 * caller gathers their hidden states into a dense [R, h] matrix and runs the head on chunks of it.
 * t2_gather_rows: dst row r (bf16 [rows, h]) = src row idx[r], or zeros where idx[r] < 0 (used both
 * to gather head rows and to scatter their gradient back to all nodes). */
t2_status t2_gather_rows(void *dst, const void *src, const int32_t *idx, int rows, int h);
/* For head rows [r0, r0+rows) (bf16 logits [rows, v], computed by the caller for those rows):
 * row_lse[r] and row_ent[r] per row (fp32, one pass, online max); then every node c whose head_row[c]
 * (its parent's head row, −1 for roots and unscored nodes) lies in [r0, r0+rows) gets
 * logp[c] = logits[head_row[c], tokens[c]] − row_lse[head_row[c]] and entropy[c] = row_ent[head_row[c]].
 * Other nodes are left untouched (the caller zeroes them). */
t2_status t2_logprob_fwd(float *logp, float *entropy, float *row_lse, float *row_ent, const void *logits,
                         const int32_t *tokens, const int32_t *head_row, int n, int r0, int rows, int v);
/* The same outputs with the vocabulary in tiles (the fused head: the [rows, v] logits never exist).
 * t2_logprob_tile_fwd, once per tile in column order: bf16 logits [rows, w] hold columns [v0, v0+w)
 * of head rows [r0, r0+rows); each row's running state (fp32 [rows, 3]: max, Σe^(x−max),
 * Σe^(x−max)·x) is started by the tile at v0 = 0 and merged with every later one, and each scored
 * child c of those rows (child_off [R+1] / child_idx, CSR) whose token lies in the tile gets its
 * bf16 target logit in logp[c]. t2_logprob_tile_finish, after the last tile: row_lse, row_ent and
 * the children's logp (target logit − lse) and entropy, as t2_logprob_fwd computes them. */
t2_status t2_logprob_tile_fwd(float *state, float *logp, const void *logits, const int32_t *tokens,
                              const int32_t *child_off, const int32_t *child_idx, int r0, int rows, int v0, int w);
t2_status t2_logprob_tile_finish(float *logp, float *entropy, float *row_lse, float *row_ent, const float *state,
                                 const int32_t *child_off, const int32_t *child_idx, int r0, int rows);
/* In place over the same head rows, bf16 logits [rows, w] holding columns [v0, v0+w) (v0 = 0 and
 * w = v for the whole vocabulary): logits → dlogits = Σ_children g_c·(onehot(t_c) − softmax) (bf16),
 * where child_off [R+1] / child_idx list each head row's scored children (CSR), g = dlogp, and
 * row_lse and logp hold the forward's full-row lse and log-probs (so the target probability needs
 * no second read of the overwritten logit, and a tile's gradient needs no other tile). */
t2_status t2_logprob_bwd(void *logits, const float *row_lse, const float *logp, const float *dlogp,
                         const int32_t *tokens, const int32_t *child_off, const int32_t *child_idx, int r0,
                         int rows, int v0, int w);

/* ---- adamw.cu: global norm, clipping and AdamW on fp32 master weights with bf16 copies ---- */
/* partial [blocks] must hold T2_NORM_BLOCKS floats; sumsq = Σ g² (fp64 on the host side). */
#define T2_NORM_BLOCKS 1024
t2_status t2_sumsq(double *sumsq, float *partial, const float *g, size_t count);
/* Reads grad and leaves it: the caller zeroes or overwrites it before the next accumulation. */
t2_status t2_adamw(float *master, void *param_bf16, float *grad, float *m, float *v, size_t count, float lr,
                   float beta1, float beta2, float eps, float weight_decay, float grad_scale, float bc1,
                   float bc2);

/* ---- paged_attention.cu: serving attention over a paged KV cache ---- */
/* Caches are per layer [slots][kvdim] bf16 (slot = block·block_size + offset), one for K, one for V.
 * t2_kv_write: row t of k [n, k_stride] and of v [n, v_stride] (kvdim wide) go to slot slots[t]. */
t2_status t2_kv_write(void *kc, void *vc, const void *k, const void *v, int k_stride, int v_stride,
                      const int32_t *slots, int n, int kvdim);
/* Work items (8 int32 each): {first token row, tokens, kv head, key_lo, key_hi, offset of the
 * sequence's block table in tables, partial index, 0}: rows (token i, head kvh·g + j) → row i·g + j
 * of the item's T2_PAGED_ROWS partial rows. Each attends q rows (q [n, q_stride], head h at h·d) to
 * cached positions [key_lo, key_hi) and writes part_o [items·ROWS, d] (fp32, normalised) and
 * part_lse [items·ROWS] (base-2, scores scaled by log2(e)/sqrt(d), as t2_attention_fwd's lse).
 * max_rows (≤ ROWS) bounds every item's rows: the kernel is compiled for 2, 4, 8 and 16 rows, so a
 * decode step (rows = the GQA group) runs no loop over absent rows. */
#define T2_PAGED_ROWS 16
t2_status t2_paged_attention(float *part_o, float *part_lse, const void *q, int q_stride, const void *kc,
                             const void *vc, const int32_t *tables, const int32_t *items, int nitems,
                             int block_size, int nh, int nkv, int d, int max_rows);
/* The same partials on the tensor cores (attention_fa2.cu, issue 28), for items of up to 64 query
 * rows gathered from anywhere in the step: a prefill chunk after a cached prefix, or the decode
 * tokens of sequences sharing a cached prefix (cascade attention, the shared blocks read once for
 * the group). mitems (8 int32 each): {rows ≤ 64, kv head, key_lo, key_hi, offset of the block
 * table in tables, offset of the item's rows in mrows, 0, 0}; mrows: 3 int32 per row {token,
 * query head (of kv head's group), destination = partial slot·T2_PAGED_ROWS + row}. */
t2_status t2_paged_attention_mma(float *part_o, float *part_lse, const void *q, int q_stride, const void *kc,
                                 const void *vc, const int32_t *tables, const int32_t *mitems, const int32_t *mrows,
                                 int nitems, int block_size, int nkv, int d);
/* att [n, nh·d] bf16 and lse [nh, n] hold t2_attention_fwd's result over the step's own tokens;
 * tokens with tok_info[3t] ≥ 0 ({first item, splits, first row}) get it merged with their partials
 * (has_base = 0: no such result, att is written from the partials alone). */
t2_status t2_paged_merge(void *att, const float *lse, const float *part_o, const float *part_lse,
                         const int32_t *tok_info, int n, int nh, int nkv, int d, int has_base);
/* deterministic pseudo-random bf16 values of the given std (benchmark caches) */
t2_status t2_fill_random_bf16(void *p, size_t count, uint32_t seed, float std);

/* ---- sample.cu: gpu.SampleLogits on the device ---- */
/* logits bf16 [rows, v]; fparams [rows, 3] = {temperature, top_p, min_p}; top_k [rows]; uniform
 * [rows] (fp64); out [rows, 2] = {token, fp32 bits of its log-prob}. */
#define T2_SAMPLE_CAND 4096
t2_status t2_sample(int32_t *out, const void *logits, const float *fparams, const int32_t *top_k,
                    const double *uniform, int rows, int v);

#ifdef __cplusplus
}
#endif
#endif
