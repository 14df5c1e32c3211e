/*
 * norm.cu: RMSNorm (fused with the residual add) and Qwen3's per-head q/k RMSNorm + rotate-half RoPE,
 * forward and backward.
 *
 * Numerics follow transformers' Qwen3RMSNorm exactly: normalize in fp32, round to bf16, then multiply
 * by the bf16 weight (so y = bf16(w · bf16(x·rstd))); the residual add rounds to bf16 as a bf16
 * tensor add does. RoPE follows Qwen3RotaryEmbedding: inv_freq = 1/θ^(2j/d) in fp32, angle = pos ·
 * inv_freq in fp32, cos/sin rounded to bf16, x·cos + rotate_half(x)·sin with bf16 rounding per op.
 *
 * Backward passes treat the bf16 roundings as identity (as autograd does for casts) and accumulate
 * in fp32. Parameter gradients use "+=" (accumulation over micro-batches, llm.c's convention);
 * the residual-stream gradient is fp32 and also "+=" (it sums the skip path and the branch).
 * defines: t2_rmsnorm_fwd, t2_rmsnorm_bwd, t2_qknorm_rope_fwd, t2_qknorm_rope_bwd
 */
#include "common.cuh"
#include <math.h>

#define NORM_THREADS 256 /* 8 warps, one row per warp */

/* ------------------------------------------------------------------------------------------------ */

__global__ void rmsnorm_fwd_kernel(bf16 *out, bf16 *resid_out, float *rstd, const bf16 *x, const bf16 *delta,
                                   const bf16 *w, int n, int c, float eps) {
    const int row = blockIdx.x * (NORM_THREADS / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= n) return;
    const bf16 *xr = x + (size_t)row * c;
    const bf16 *dr = delta ? delta + (size_t)row * c : nullptr;
    bf16 *rr = resid_out ? resid_out + (size_t)row * c : nullptr;
    float ss = 0.f;
    for (int i = lane; i < c; i += 32) {
        float r = __bfloat162float(xr[i]);
        if (dr) {
            r = rbf(r + __bfloat162float(dr[i]));
            rr[i] = __float2bfloat16(r);
        }
        ss += r * r;
    }
    ss = warp_sum(ss);
    const float rs = rsqrtf(ss / (float)c + eps);
    if (lane == 0) rstd[row] = rs;
    const bf16 *src = dr ? (const bf16 *)rr : xr;
    bf16 *o = out + (size_t)row * c;
    for (int i = lane; i < c; i += 32) {
        const float r = __bfloat162float(src[i]);
        o[i] = __float2bfloat16(__bfloat162float(w[i]) * rbf(r * rs));
    }
}

extern "C" t2_status t2_rmsnorm_fwd(void *out, void *resid_out, float *rstd, const void *x, const void *delta,
                                    const void *w, int n, int c, float eps) {
    T2_REQUIRE(n > 0 && c > 0, "t2_rmsnorm_fwd(shape)");
    T2_REQUIRE(delta == NULL || resid_out != NULL, "t2_rmsnorm_fwd(resid_out)");
    rmsnorm_fwd_kernel<<<ceil_div(n, NORM_THREADS / 32), NORM_THREADS>>>(
        (bf16 *)out, (bf16 *)resid_out, rstd, (const bf16 *)x, (const bf16 *)delta, (const bf16 *)w, n, c, eps);
    T2_LAUNCHED("rmsnorm_fwd_kernel");
    return t2_ok();
}

/* Each block handles rows blockIdx.x, +gridDim.x, … with one warp per row; the weight gradient is
 * summed in shared memory (c floats) and added to dw once per block. */
__global__ void rmsnorm_bwd_kernel(float *dresid, bf16 *dresid_bf16, float *dw, const bf16 *dout, const bf16 *x,
                                   const float *rstd, const bf16 *w, int n, int c) {
    extern __shared__ float sdw[];
    for (int i = threadIdx.x; i < c; i += NORM_THREADS) sdw[i] = 0.f;
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int rows_per_step = gridDim.x * (NORM_THREADS / 32);
    for (int row = blockIdx.x * (NORM_THREADS / 32) + warp; row < n; row += rows_per_step) {
        const bf16 *xr = x + (size_t)row * c, *dr = dout + (size_t)row * c;
        const float rs = rstd[row];
        float dot = 0.f; /* Σ dx̂·x̂ */
        for (int i = lane; i < c; i += 32) {
            const float xh = __bfloat162float(xr[i]) * rs;
            const float dyi = __bfloat162float(dr[i]);
            const float dxh = rbf(dyi * __bfloat162float(w[i]));
            dot += dxh * xh;
            atomicAdd(&sdw[i], dyi * rbf(xh));
        }
        dot = warp_sum(dot) / (float)c;
        float *g = dresid + (size_t)row * c;
        bf16 *gb = dresid_bf16 ? dresid_bf16 + (size_t)row * c : nullptr;
        for (int i = lane; i < c; i += 32) {
            const float xh = __bfloat162float(xr[i]) * rs;
            const float dxh = rbf(__bfloat162float(dr[i]) * __bfloat162float(w[i]));
            const float v = g[i] + rs * (dxh - xh * dot);
            g[i] = v;
            if (gb) gb[i] = __float2bfloat16(v);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < c; i += NORM_THREADS) atomicAdd(&dw[i], sdw[i]);
}

extern "C" t2_status t2_rmsnorm_bwd(float *dresid, void *dresid_bf16, float *dw, const void *dout, const void *x,
                                    const float *rstd, const void *w, int n, int c) {
    T2_REQUIRE(n > 0 && c > 0 && c <= 12288, "t2_rmsnorm_bwd(shape)");
    int blocks = ceil_div(n, NORM_THREADS / 32);
    if (blocks > 512) blocks = 512;
    const size_t smem = (size_t)c * sizeof(float);
    if (smem > 48 * 1024)
        T2_CUDA(cudaFuncSetAttribute(rmsnorm_bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    rmsnorm_bwd_kernel<<<blocks, NORM_THREADS, smem>>>(dresid, (bf16 *)dresid_bf16, dw, (const bf16 *)dout,
                                                       (const bf16 *)x, rstd, (const bf16 *)w, n, c);
    T2_LAUNCHED("rmsnorm_bwd_kernel");
    return t2_ok();
}

/* ------------------------------------------------------------------------------------------------ */
/* q/k head norm + RoPE. One warp per (token, head) where heads 0..nh-1 are q heads and nh..nh+nkv-1
 * are k heads; lane handles the rotate-half pairs (j, j + d/2) for j = lane, lane+32, … < d/2. */

#define QK_MAX_HALF 128 /* head_dim ≤ 256 */

__device__ __forceinline__ float rope_inv_freq(int j, int d, float theta) {
    /* torch: 1.0 / (base ** (arange(0, d, 2).float() / d)), each step rounded to fp32 */
    const float e = (float)(2 * j) / (float)d;
    const float p = (float)pow((double)theta, (double)e);
    return 1.0f / p;
}

__global__ void qknorm_rope_fwd_kernel(bf16 *qout, bf16 *kout, float *rstd_q, float *rstd_k, const bf16 *qkv,
                                       const bf16 *qw, const bf16 *kw, const int32_t *positions, int n, int nh,
                                       int nkv, int d, float eps, float theta) {
    __shared__ float inv_freq[QK_MAX_HALF];
    const int half = d / 2;
    for (int j = threadIdx.x; j < half; j += blockDim.x) inv_freq[j] = rope_inv_freq(j, d, theta);
    __syncthreads();
    const long wid = (long)blockIdx.x * (NORM_THREADS / 32) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    const int heads = nh + nkv;
    if (wid >= (long)n * heads) return;
    const int t = (int)(wid / heads), hd = (int)(wid - (long)t * heads);
    const bool isq = hd < nh;
    const int stride = (nh + 2 * nkv) * d;
    const bf16 *src = qkv + (size_t)t * stride + hd * d; /* k heads follow the q heads in the qkv row */
    const bf16 *w = isq ? qw : kw;
    bf16 *dst = isq ? qout + (size_t)t * nh * d + hd * d : kout + (size_t)t * nkv * d + (hd - nh) * d;
    float ss = 0.f;
    for (int i = lane; i < d; i += 32) {
        const float x = __bfloat162float(src[i]);
        ss += x * x;
    }
    ss = warp_sum(ss);
    const float rs = rsqrtf(ss / (float)d + eps);
    if (lane == 0) {
        if (isq) rstd_q[(size_t)t * nh + hd] = rs;
        else rstd_k[(size_t)t * nkv + (hd - nh)] = rs;
    }
    const float pos = (float)positions[t];
    for (int j = lane; j < half; j += 32) {
        const float x1 = rbf(__bfloat162float(w[j]) * rbf(__bfloat162float(src[j]) * rs));
        const float x2 = rbf(__bfloat162float(w[j + half]) * rbf(__bfloat162float(src[j + half]) * rs));
        const float ang = pos * inv_freq[j];
        const float cs = rbf(cosf(ang)), sn = rbf(sinf(ang));
        dst[j] = __float2bfloat16(rbf(x1 * cs) + rbf(-x2 * sn));
        dst[j + half] = __float2bfloat16(rbf(x2 * cs) + rbf(x1 * sn));
    }
}

extern "C" t2_status t2_qknorm_rope_fwd(void *qout, void *kout, float *rstd_q, float *rstd_k, const void *qkv,
                                        const void *qw, const void *kw, const int32_t *positions, int n, int nh,
                                        int nkv, int d, float eps, float theta) {
    T2_REQUIRE(n > 0 && d % 2 == 0 && d / 2 <= QK_MAX_HALF, "t2_qknorm_rope_fwd(shape)");
    const long warps = (long)n * (nh + nkv);
    qknorm_rope_fwd_kernel<<<(int)((warps + 7) / 8), NORM_THREADS>>>(
        (bf16 *)qout, (bf16 *)kout, rstd_q, rstd_k, (const bf16 *)qkv, (const bf16 *)qw, (const bf16 *)kw, positions,
        n, nh, nkv, d, eps, theta);
    T2_LAUNCHED("qknorm_rope_fwd_kernel");
    return t2_ok();
}

/* Backward: dxn from the RoPE transpose, then the RMSNorm backward over d; the weight gradients
 * (q_norm, k_norm: [d] each) are summed per block in shared memory. Blocks loop over warps' work. */
__global__ void qknorm_rope_bwd_kernel(bf16 *dqkv, float *dqw, float *dkw, const bf16 *dq, const bf16 *dk,
                                       const bf16 *qkv, const float *rstd_q, const float *rstd_k, const bf16 *qw,
                                       const bf16 *kw, const int32_t *positions, int n, int nh, int nkv, int d,
                                       float theta) {
    __shared__ float inv_freq[QK_MAX_HALF];
    __shared__ float sdw[2][2 * QK_MAX_HALF];
    const int half = d / 2;
    for (int j = threadIdx.x; j < half; j += blockDim.x) inv_freq[j] = rope_inv_freq(j, d, theta);
    for (int j = threadIdx.x; j < 2 * QK_MAX_HALF; j += blockDim.x) sdw[0][j] = sdw[1][j] = 0.f;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int heads = nh + nkv;
    const int stride = (nh + 2 * nkv) * d;
    const long total = (long)n * heads;
    const long step = (long)gridDim.x * (NORM_THREADS / 32);
    for (long wid = (long)blockIdx.x * (NORM_THREADS / 32) + (threadIdx.x >> 5); wid < total; wid += step) {
        const int t = (int)(wid / heads), hd = (int)(wid - (long)t * heads);
        const bool isq = hd < nh;
        const bf16 *src = qkv + (size_t)t * stride + hd * d;
        const bf16 *w = isq ? qw : kw;
        const bf16 *gy = isq ? dq + (size_t)t * nh * d + hd * d : dk + (size_t)t * nkv * d + (hd - nh) * d;
        const float rs = isq ? rstd_q[(size_t)t * nh + hd] : rstd_k[(size_t)t * nkv + (hd - nh)];
        const float pos = (float)positions[t];
        float *sw = sdw[isq ? 0 : 1];
        /* pass 1: dxn (RoPE transpose), dw, and Σ dx̂·x̂ */
        float dot = 0.f;
        for (int j = lane; j < half; j += 32) {
            const float ang = pos * inv_freq[j];
            const float cs = rbf(cosf(ang)), sn = rbf(sinf(ang));
            const float g1 = __bfloat162float(gy[j]), g2 = __bfloat162float(gy[j + half]);
            const float dxn1 = g1 * cs + g2 * sn;
            const float dxn2 = -g1 * sn + g2 * cs;
            const float xh1 = __bfloat162float(src[j]) * rs, xh2 = __bfloat162float(src[j + half]) * rs;
            atomicAdd(&sw[j], dxn1 * rbf(xh1));
            atomicAdd(&sw[j + half], dxn2 * rbf(xh2));
            const float dxh1 = dxn1 * __bfloat162float(w[j]), dxh2 = dxn2 * __bfloat162float(w[j + half]);
            dot += dxh1 * xh1 + dxh2 * xh2;
        }
        dot = warp_sum(dot) / (float)d;
        bf16 *out = dqkv + (size_t)t * stride + hd * d;
        for (int j = lane; j < half; j += 32) {
            const float ang = pos * inv_freq[j];
            const float cs = rbf(cosf(ang)), sn = rbf(sinf(ang));
            const float g1 = __bfloat162float(gy[j]), g2 = __bfloat162float(gy[j + half]);
            const float dxh1 = (g1 * cs + g2 * sn) * __bfloat162float(w[j]);
            const float dxh2 = (-g1 * sn + g2 * cs) * __bfloat162float(w[j + half]);
            const float xh1 = __bfloat162float(src[j]) * rs, xh2 = __bfloat162float(src[j + half]) * rs;
            out[j] = __float2bfloat16(rs * (dxh1 - xh1 * dot));
            out[j + half] = __float2bfloat16(rs * (dxh2 - xh2 * dot));
        }
    }
    __syncthreads();
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        atomicAdd(&dqw[j], sdw[0][j]);
        atomicAdd(&dkw[j], sdw[1][j]);
    }
}

extern "C" t2_status t2_qknorm_rope_bwd(void *dqkv, float *dqw, float *dkw, const void *dq, const void *dk,
                                        const void *qkv, const float *rstd_q, const float *rstd_k, const void *qw,
                                        const void *kw, const int32_t *positions, int n, int nh, int nkv, int d,
                                        float theta) {
    T2_REQUIRE(n > 0 && d % 2 == 0 && d / 2 <= QK_MAX_HALF, "t2_qknorm_rope_bwd(shape)");
    const long warps = (long)n * (nh + nkv);
    long blocks = (warps + 7) / 8;
    if (blocks > 1024) blocks = 1024;
    qknorm_rope_bwd_kernel<<<(int)blocks, NORM_THREADS>>>((bf16 *)dqkv, dqw, dkw, (const bf16 *)dq, (const bf16 *)dk,
                                                          (const bf16 *)qkv, rstd_q, rstd_k, (const bf16 *)qw,
                                                          (const bf16 *)kw, positions, n, nh, nkv, d, theta);
    T2_LAUNCHED("qknorm_rope_bwd_kernel");
    return t2_ok();
}
