/*
 * logprob.cu: log-softmax gather and entropy over the vocabulary for a chunk of rows, and its
 * backward, without ever holding fp32 logits (the caller computes bf16 logits for a few thousand
 * rows at a time; 151,936 × 4 bytes per token for the whole micro-batch would not fit).
 *
 * Rows are "head rows": the compacted list of nodes that are the parent of at least one scored node
 * (gpu.MicroBatch.Score), gathered into a dense [R, hidden] matrix by t2_gather_rows, so nodes whose
 * distribution nobody needs (mostly prompt tokens in RL batches) never reach the 151,936-wide head.
 *
 * Forward, one block per row: one pass with a running max keeps m, Σe^(x−m) and Σe^(x−m)·x, giving
 * lse = m + log Σ and entropy = lse − E[x]. A second tiny kernel gathers, per scored child node, the
 * logit of its token from its parent's head row (a branching node's row scores several children).
 *
 * Backward, in place: d logp_c / d x = onehot(t_c) − softmax(x), so the row's gradient is
 * −softmax·G + Σ_c g_c·onehot(t_c) with G = Σ_c g_c over the row's children (llm.c's fused_classifier
 * idea). Only Backward's dlogp flows; entropy carries no gradient.
 *
 * Fused head (Options.VocabTile > 0): the caller computes the logits one vocabulary tile
 * [rows, w] at a time, so no [rows, 151,936] buffer exists. Forward folds each tile into a per-row
 * running state (the same (m, Σe^(x−m), Σe^(x−m)·x) merged with lse_merge, so only the fp32
 * summation order differs from the one-pass kernel) and records each scored child's target logit
 * when its token is in the tile; a finishing kernel turns the states into row_lse/row_ent and the
 * children's logp/entropy, the same outputs t2_logprob_fwd writes. Backward needs only the row's
 * lse and G, so t2_logprob_bwd takes a column range and converts one recomputed tile at a time.
 *
 * The row passes are bound by reading (and, backward, rewriting) the logits: they use 16-byte
 * vectors when the row width is a multiple of 8 (every row then starts 16-byte aligned), scalar
 * accesses otherwise, with the same formulas.
 * defines: t2_gather_rows, t2_logprob_fwd, t2_logprob_tile_fwd, t2_logprob_tile_finish, t2_logprob_bwd
 */
#include "common.cuh"
#include "vec.cuh"
#include <math.h>
#include <stdint.h>

#define LP_THREADS 512

/* One block per destination row; 16-byte vectors when the row width allows (hidden sizes are
 * multiples of 8), bf16 elements otherwise. */
__global__ void gather_rows_kernel(bf16 *dst, const bf16 *src, const int32_t *idx, int h) {
    const int r = blockIdx.x, i = idx[r];
    bf16 *d = dst + (size_t)r * h;
    if (h % 8 == 0) {
        uint4 *d4 = (uint4 *)d;
        const uint4 *s4 = (const uint4 *)(src + (size_t)(i < 0 ? 0 : i) * h);
        for (int k = threadIdx.x; k < h / 8; k += blockDim.x) d4[k] = i < 0 ? make_uint4(0, 0, 0, 0) : s4[k];
        return;
    }
    for (int k = threadIdx.x; k < h; k += blockDim.x) d[k] = i < 0 ? __float2bfloat16(0.f) : src[(size_t)i * h + k];
}

extern "C" t2_status t2_gather_rows(void *dst, const void *src, const int32_t *idx, int rows, int h) {
    T2_REQUIRE(rows > 0 && h > 0, "t2_gather_rows(shape)");
    gather_rows_kernel<<<rows, 256, 0, t2_stream>>>((bf16 *)dst, (const bf16 *)src, idx, h);
    T2_LAUNCHED("gather_rows_kernel");
    return t2_ok();
}

__device__ __forceinline__ void lse_merge(float &m, float &s, float &t, float m2, float s2, float t2) {
    const float mm = fmaxf(m, m2);
    if (mm == -INFINITY) return;
    const float a = __expf(m - mm), b = __expf(m2 - mm);
    s = s * a + s2 * b;
    t = t * a + t2 * b;
    m = mm;
}

/* lse_add folds one logit into the running (max m, Σe^(x−m), Σe^(x−m)·x). */
__device__ __forceinline__ void lse_add(float &m, float &s, float &t, float xi) {
    if (xi > m) {
        const float a = __expf(m - xi); /* m = -inf → 0 */
        s = s * a + 1.f;
        t = t * a + xi;
        m = xi;
    } else {
        const float e = __expf(xi - m);
        s += e;
        t += e * xi;
    }
}

/* lse_add8 folds 8 logits: one rescale to their max (when it is a new max), then one exponential
 * per logit — the same sums as eight lse_add calls up to fp32 rounding order. */
__device__ __forceinline__ void lse_add8(float &m, float &s, float &t, const uint4 &u) {
    float x[8];
    unpack8(u, x);
    float mx = x[0];
#pragma unroll
    for (int e = 1; e < 8; ++e) mx = fmaxf(mx, x[e]);
    if (mx > m) {
        const float a = __expf(m - mx); /* m = -inf → 0 */
        s *= a;
        t *= a;
        m = mx;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const float ex = __expf(x[e] - m);
        s += ex;
        t += ex * x[e];
    }
}

/* row_stats folds the row x[0, v) into the running (max m, Σe^(x−m), Σe^(x−m)·x) across the block;
 * thread 0 ends with the row's totals (other threads with partial ones). VEC: the row is read as
 * 16-byte vectors (v a multiple of 8 and x 16-byte aligned), two per thread and step so that two
 * loads are in flight. sm, ss, st: 32 floats of shared memory each. Every thread must call it
 * (block-wide barrier inside). */
template <bool VEC>
__device__ __forceinline__ void row_stats(const bf16 *x, int v, float &m, float &s, float &t, float *sm, float *ss,
                                          float *st) {
    m = -INFINITY;
    s = 0.f;
    t = 0.f;
    if (VEC) {
        const uint4 *x8 = reinterpret_cast<const uint4 *>(x);
        const int nv = v / 8;
        int i = threadIdx.x;
        for (; i + LP_THREADS < nv; i += 2 * LP_THREADS) {
            const uint4 a = x8[i], b = x8[i + LP_THREADS];
            lse_add8(m, s, t, a);
            lse_add8(m, s, t, b);
        }
        if (i < nv) lse_add8(m, s, t, x8[i]);
    } else {
        for (int i = threadIdx.x; i < v; i += LP_THREADS) lse_add(m, s, t, __bfloat162float(x[i]));
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o),
                    t2 = __shfl_xor_sync(0xffffffffu, t, o);
        lse_merge(m, s, t, m2, s2, t2);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
        st[warp] = t;
    }
    __syncthreads();
    if (warp == 0) {
        const int nw = LP_THREADS / 32;
        m = lane < nw ? sm[lane] : -INFINITY;
        s = lane < nw ? ss[lane] : 0.f;
        t = lane < nw ? st[lane] : 0.f;
        for (int o = 16; o > 0; o >>= 1) {
            const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o),
                        t2 = __shfl_xor_sync(0xffffffffu, t, o);
            lse_merge(m, s, t, m2, s2, t2);
        }
    }
}

/* One block per row (row_stats over the whole vocabulary). */
template <bool VEC>
__global__ void __launch_bounds__(LP_THREADS) logprob_rows_kernel(float *row_lse, float *row_ent, const bf16 *logits,
                                                                 int r0, int v) {
    __shared__ float sm[32], ss[32], st[32];
    const int row = blockIdx.x;
    float m, s, t;
    row_stats<VEC>(logits + (size_t)row * v, v, m, s, t, sm, ss, st);
    if (threadIdx.x == 0) {
        const float lse = m + logf(s);
        row_lse[r0 + row] = lse;
        row_ent[r0 + row] = lse - t / s;
    }
}

__global__ void logprob_gather_kernel(float *logp, float *entropy, const float *row_lse, const float *row_ent,
                                      const bf16 *logits, const int32_t *tokens, const int32_t *head_row, int n, int r0,
                                      int rows, int v) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) return;
    const int r = head_row[c]; /* -1: a root or an unscored node */
    if (r < r0 || r >= r0 + rows) return;
    logp[c] = __bfloat162float(logits[(size_t)(r - r0) * v + tokens[c]]) - row_lse[r];
    entropy[c] = row_ent[r];
}

extern "C" t2_status t2_logprob_fwd(float *logp, float *entropy, float *row_lse, float *row_ent, const void *logits,
                                    const int32_t *tokens, const int32_t *head_row, int n, int r0, int rows, int v) {
    T2_REQUIRE(n > 0 && rows > 0 && v > 0 && r0 >= 0 && r0 + rows <= n, "t2_logprob_fwd(shape)");
    if (v % 8 == 0 && aligned16(logits))
        logprob_rows_kernel<true><<<rows, LP_THREADS, 0, t2_stream>>>(row_lse, row_ent, (const bf16 *)logits, r0, v);
    else
        logprob_rows_kernel<false><<<rows, LP_THREADS, 0, t2_stream>>>(row_lse, row_ent, (const bf16 *)logits, r0, v);
    T2_LAUNCHED("logprob_rows_kernel");
    logprob_gather_kernel<<<ceil_div(n, 256), 256, 0, t2_stream>>>(logp, entropy, row_lse, row_ent, (const bf16 *)logits, tokens,
                                                     head_row, n, r0, rows, v);
    T2_LAUNCHED("logprob_gather_kernel");
    return t2_ok();
}

/* Fused head, forward, one block per row of a vocabulary tile: logits [rows, w] hold columns
 * [v0, v0+w) of head rows [r0, r0+rows). The tile's (m, Σe^(x−m), Σe^(x−m)·x) is merged into the
 * row's running state [rows, 3] (the first tile, v0 = 0, starts it), and every scored child whose
 * token lies in the tile gets its target logit (bf16, as t2_logprob_fwd reads it) in logp, for
 * logprob_finish_kernel to subtract the row's lse from once the row is complete. */
template <bool VEC>
__global__ void __launch_bounds__(LP_THREADS)
    logprob_tile_kernel(float *state, float *logp, const bf16 *logits, const int32_t *tokens, const int32_t *child_off,
                        const int32_t *child_idx, int r0, int v0, int w) {
    __shared__ float sm[32], ss[32], st[32];
    const int row = blockIdx.x, r = r0 + row;
    const int c0 = child_off[r], c1 = child_off[r + 1];
    const bf16 *x = logits + (size_t)row * w;
    for (int k = c0 + threadIdx.x; k < c1; k += LP_THREADS) {
        const int c = child_idx[k], j = tokens[c] - v0;
        if (j >= 0 && j < w) logp[c] = __bfloat162float(x[j]);
    }
    float m, s, t;
    row_stats<VEC>(x, w, m, s, t, sm, ss, st);
    if (threadIdx.x == 0) {
        float *p = state + 3 * (size_t)row;
        if (v0 > 0) lse_merge(m, s, t, p[0], p[1], p[2]);
        p[0] = m;
        p[1] = s;
        p[2] = t;
    }
}

/* One thread per head row of the chunk: the row's lse and entropy from its complete state (the same
 * formulas as logprob_rows_kernel), then its scored children's log-probs (logp holds their target
 * logits) and entropies, as logprob_gather_kernel computes them. */
__global__ void logprob_finish_kernel(float *logp, float *entropy, float *row_lse, float *row_ent, const float *state,
                                      const int32_t *child_off, const int32_t *child_idx, int r0, int rows) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const int r = r0 + row;
    const float m = state[3 * (size_t)row], s = state[3 * (size_t)row + 1], t = state[3 * (size_t)row + 2];
    const float lse = m + logf(s), ent = lse - t / s;
    row_lse[r] = lse;
    row_ent[r] = ent;
    for (int k = child_off[r]; k < child_off[r + 1]; ++k) {
        const int c = child_idx[k];
        logp[c] -= lse;
        entropy[c] = ent;
    }
}

extern "C" t2_status t2_logprob_tile_fwd(float *state, float *logp, const void *logits, const int32_t *tokens,
                                         const int32_t *child_off, const int32_t *child_idx, int r0, int rows, int v0,
                                         int w) {
    T2_REQUIRE(rows > 0 && w > 0 && r0 >= 0 && v0 >= 0, "t2_logprob_tile_fwd(shape)");
    if (w % 8 == 0 && aligned16(logits))
        logprob_tile_kernel<true><<<rows, LP_THREADS, 0, t2_stream>>>(state, logp, (const bf16 *)logits, tokens,
                                                                       child_off, child_idx, r0, v0, w);
    else
        logprob_tile_kernel<false><<<rows, LP_THREADS, 0, t2_stream>>>(state, logp, (const bf16 *)logits, tokens,
                                                                        child_off, child_idx, r0, v0, w);
    T2_LAUNCHED("logprob_tile_kernel");
    return t2_ok();
}

extern "C" t2_status t2_logprob_tile_finish(float *logp, float *entropy, float *row_lse, float *row_ent,
                                            const float *state, const int32_t *child_off, const int32_t *child_idx,
                                            int r0, int rows) {
    T2_REQUIRE(rows > 0 && r0 >= 0, "t2_logprob_tile_finish(shape)");
    logprob_finish_kernel<<<ceil_div(rows, 256), 256, 0, t2_stream>>>(logp, entropy, row_lse, row_ent, state, child_off,
                                                                      child_idx, r0, rows);
    T2_LAUNCHED("logprob_finish_kernel");
    return t2_ok();
}

/* -p·G for the 8 logits in u (p = softmax = e^(x − lse)) */
__device__ __forceinline__ uint4 dlogits8(const uint4 &u, float lse, float G) {
    float x[8];
    unpack8(u, x);
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = -__expf(x[e] - lse) * G;
    return pack8(x);
}

/* One block per row; VEC as in row_stats (two 16-byte vectors per thread and step, both loaded
 * before either is written back). logits [rows, w] hold columns [v0, v0+w) of the rows (the whole
 * vocabulary in the chunked head, one tile in the fused one); G and the target columns use the
 * row's complete lse and children, so each tile's gradient is exact on its own. */
template <bool VEC>
__global__ void __launch_bounds__(LP_THREADS)
    logprob_bwd_kernel(bf16 *logits, const float *row_lse, const float *logp, const float *dlogp,
                       const int32_t *tokens, const int32_t *child_off, const int32_t *child_idx, int r0, int v0,
                       int w) {
    __shared__ float sred[32];
    const int row = blockIdx.x, r = r0 + row;
    const int c0 = child_off[r], c1 = child_off[r + 1];
    float g = 0.f;
    for (int k = c0 + threadIdx.x; k < c1; k += LP_THREADS) g += dlogp[child_idx[k]];
    const float G = block_sum(g, sred);
    bf16 *x = logits + (size_t)row * w;
    const float lse = row_lse[r];
    if (VEC) {
        uint4 *x8 = reinterpret_cast<uint4 *>(x);
        const int nv = w / 8;
        int i = threadIdx.x;
        for (; i + LP_THREADS < nv; i += 2 * LP_THREADS) {
            const uint4 a = x8[i], b = x8[i + LP_THREADS];
            x8[i] = dlogits8(a, lse, G);
            x8[i + LP_THREADS] = dlogits8(b, lse, G);
        }
        if (i < nv) x8[i] = dlogits8(x8[i], lse, G);
    } else {
        for (int i = threadIdx.x; i < w; i += LP_THREADS) {
            const float p = __expf(__bfloat162float(x[i]) - lse);
            x[i] = __float2bfloat16(-p * G);
        }
    }
    __syncthreads();
    for (int k = c0 + threadIdx.x; k < c1; k += LP_THREADS) {
        const int c = child_idx[k], tok = tokens[c];
        if (tok < v0 || tok >= v0 + w) continue; /* another tile's column */
        float val = -__expf(logp[c]) * G;
        for (int k2 = c0; k2 < c1; ++k2)
            if (tokens[child_idx[k2]] == tok) val += dlogp[child_idx[k2]];
        x[tok - v0] = __float2bfloat16(val); /* children sharing a token write the same value */
    }
}

extern "C" t2_status t2_logprob_bwd(void *logits, const float *row_lse, const float *logp, const float *dlogp,
                                    const int32_t *tokens, const int32_t *child_off, const int32_t *child_idx, int r0,
                                    int rows, int v0, int w) {
    T2_REQUIRE(rows > 0 && w > 0 && r0 >= 0 && v0 >= 0, "t2_logprob_bwd(shape)");
    if (w % 8 == 0 && aligned16(logits))
        logprob_bwd_kernel<true><<<rows, LP_THREADS, 0, t2_stream>>>((bf16 *)logits, row_lse, logp, dlogp, tokens, child_off,
                                                       child_idx, r0, v0, w);
    else
        logprob_bwd_kernel<false><<<rows, LP_THREADS, 0, t2_stream>>>((bf16 *)logits, row_lse, logp, dlogp, tokens, child_off,
                                                        child_idx, r0, v0, w);
    T2_LAUNCHED("logprob_bwd_kernel");
    return t2_ok();
}
