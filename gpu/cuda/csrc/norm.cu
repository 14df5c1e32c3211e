/*
 * norm.cu: RMSNorm (fused with the residual add) and Qwen3's per-head q/k RMSNorm + rotate-half RoPE,
 * forward and backward.
 *
 * Numerics follow transformers' Qwen3RMSNorm exactly: normalize in fp32, round to bf16, then multiply
 * by the bf16 weight (so y = bf16(w · bf16(x·rstd))); the residual add rounds to bf16 as a bf16
 * tensor add does. RoPE follows Qwen3RotaryEmbedding: inv_freq = 1/θ^(2j/d) in fp32, angle = pos ·
 * inv_freq in fp32, cos/sin rounded to bf16, x·cos + rotate_half(x)·sin with bf16 rounding per op.
 * cos/sin come from sincosf, which returns what cosf and sinf do bit for bit (one shared argument
 * reduction and the same polynomials, as the PTX shows) with no local-memory frame.
 *
 * Backward passes treat the bf16 roundings as identity (as autograd does for casts) and accumulate
 * in fp32. Parameter gradients use "+=" (accumulation over micro-batches, llm.c's convention);
 * the residual-stream gradient is fp32 and also "+=" (it sums the skip path and the branch).
 *
 * These kernels only move memory, so they are written to run at DRAM bandwidth: 16-byte loads and
 * stores (8 bf16), each row read once with its values kept in registers between the reduction and
 * the output pass, weight vectors loaded once per thread, and weight gradients summed in registers
 * across all the rows a block visits (llm.c's layernorm_backward_kernel10 idea), then reduced once
 * per block. Shapes or pointers the vectors cannot serve (width not a multiple of 8, or a pointer not
 * 16-byte aligned) take scalar kernels that compute the same values.
 * defines: t2_rmsnorm_fwd, t2_rmsnorm_bwd, t2_qknorm_rope_fwd, t2_qknorm_rope_bwd
 */
#include "common.cuh"
#include "vec.cuh"
#include <math.h>
#include <stdint.h>
#include <type_traits>

#define NORM_THREADS 256 /* 8 warps per block */
#define NORM_WARPS (NORM_THREADS / 32)

__device__ __forceinline__ uint4 ld8(const bf16 *p) { return *reinterpret_cast<const uint4 *>(p); }
/* 8 fp32 values (two 16-byte loads) rounded to 8 packed bf16 */
__device__ __forceinline__ uint4 ld8f(const float *p) {
    const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
    return make_uint4(pack2(a.x, a.y), pack2(a.z, a.w), pack2(b.x, b.y), pack2(b.z, b.w));
}
__device__ __forceinline__ void st8(bf16 *p, const uint4 &u) { *reinterpret_cast<uint4 *>(p) = u; }
/* 4 bf16 as one 8-byte access and 4 fp32 as one 16-byte access (the RMSNorm backward's quads) */
__device__ __forceinline__ uint2 ld4(const bf16 *p) { return *reinterpret_cast<const uint2 *>(p); }
__device__ __forceinline__ void st4(bf16 *p, const uint2 &u) { *reinterpret_cast<uint2 *>(p) = u; }
__device__ __forceinline__ float4 ld4f(const float *p) { return *reinterpret_cast<const float4 *>(p); }
__device__ __forceinline__ void st4f(float *p, const float4 &v) { *reinterpret_cast<float4 *>(p) = v; }


/* ------------------------------------------------------------------------------------------------ */
/* RMSNorm, 16-byte paths. A row group of G warps (32·G threads) handles one row at a time; a block
 * holds NORM_WARPS/G groups on consecutive rows and strides over the rows by the grid. Thread gt of
 * a group owns the vectors gt, gt + 32·G, …, (K of them, columns 8·vector …+7) of every row, so its
 * weight vectors, its row values and (backward) its weight-gradient partials live in registers.
 * norm_shape picks G, K for a width: the smallest group with at most 2 vectors per thread, else 8
 * warps with up to 4 (c ≤ 8192). */
#define NORM_MAX_K 4

static bool norm_shape(int c, int *g, int *k) {
    if (c % 8 != 0) return false;
    const int nv = c / 8;
    for (int G = 1; G <= NORM_WARPS; G *= 2) {
        const int K = (nv + 32 * G - 1) / (32 * G);
        if (K <= 2 || (G == NORM_WARPS && K <= NORM_MAX_K)) {
            *g = G;
            *k = K;
            return true;
        }
    }
    return false;
}

/* norm_dispatch calls launch(integral_constant G, integral_constant K) for the (G, K) norm_shape
 * chose, one of the instantiations compiled here; what names the caller in the error otherwise. */
template <int V> using ic = std::integral_constant<int, V>;
template <typename F> static t2_status norm_dispatch(int G, int K, const char *what, F launch) {
    switch (G * 16 + K) {
    case 1 * 16 + 1: return launch(ic<1>{}, ic<1>{});
    case 1 * 16 + 2: return launch(ic<1>{}, ic<2>{});
    case 2 * 16 + 2: return launch(ic<2>{}, ic<2>{});
    case 4 * 16 + 2: return launch(ic<4>{}, ic<2>{});
    case 8 * 16 + 2: return launch(ic<8>{}, ic<2>{});
    case 8 * 16 + 3: return launch(ic<8>{}, ic<3>{});
    case 8 * 16 + 4: return launch(ic<8>{}, ic<4>{});
    }
    return t2_fail(-1, what, __FILE__, __LINE__, "invalid argument");
}

/* group_sum: v summed over the row group. Warps of a multi-warp group meet through sred[buf]; the
 * caller alternates buf (0, 1) between rows so one barrier per row suffices (a warp can only write
 * sred[buf] again after the next row's barrier, which every reader of this row has passed). Every
 * thread of the block must call it. The sum is the same, bit for bit, in every thread of a group. */
template <int G>
__device__ __forceinline__ float group_sum(float v, float (*sred)[NORM_WARPS], int buf) {
    v = warp_sum(v);
    if (G == 1) return v;
    const int warp = threadIdx.x >> 5, first = warp / G * G;
    if ((threadIdx.x & 31) == 0) sred[buf][warp] = v;
    __syncthreads();
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < G; ++i) s += sred[buf][first + i];
    return s;
}

/* Forward: one read of x (and delta), one write of out (and resid_out); the residual sum stays in
 * registers as bf16 (it is a bf16 tensor). */
template <int G, int K>
__global__ void __launch_bounds__(NORM_THREADS)
    rmsnorm_fwd_vec(bf16 *out, bf16 *resid_out, float *rstd, const bf16 *x, const bf16 *delta, const bf16 *w, int n,
                    int c, float eps) {
    __shared__ float sred[2][NORM_WARPS];
    constexpr int GT = 32 * G, RG = NORM_WARPS / G;
    const int grp = threadIdx.x / GT, gt = threadIdx.x % GT, nv = c / 8;
    uint4 wv[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int vi = k * GT + gt;
        wv[k] = vi < nv ? ld8(w + (size_t)vi * 8) : make_uint4(0, 0, 0, 0);
    }
    int buf = 0;
    for (long base = (long)blockIdx.x * RG; base < n; base += (long)gridDim.x * RG, buf ^= 1) {
        const long row = base + grp;
        const bool ok = row < n;
        const size_t ro = (size_t)row * c;
        uint4 rv[K], dv[K];
#pragma unroll
        for (int k = 0; k < K; ++k) { /* every load of the row before any store */
            const int vi = k * GT + gt;
            const bool on = ok && vi < nv;
            rv[k] = on ? ld8(x + ro + (size_t)vi * 8) : make_uint4(0, 0, 0, 0);
            dv[k] = on && delta ? ld8(delta + ro + (size_t)vi * 8) : make_uint4(0, 0, 0, 0);
        }
        float ss = 0.f;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int vi = k * GT + gt;
            float r[8];
            unpack8(rv[k], r);
            if (delta) {
                float d[8];
                unpack8(dv[k], d);
#pragma unroll
                for (int e = 0; e < 8; ++e) r[e] = rbf(r[e] + d[e]);
                rv[k] = pack8(r); /* exact: r is already bf16 */
                if (ok && vi < nv) st8(resid_out + ro + (size_t)vi * 8, rv[k]);
            }
#pragma unroll
            for (int e = 0; e < 8; ++e) ss += r[e] * r[e];
        }
        ss = group_sum<G>(ss, sred, buf);
        const float rs = rsqrtf(ss / (float)c + eps);
        if (!ok) continue;
        if (gt == 0) rstd[row] = rs;
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int vi = k * GT + gt;
            if (vi >= nv) continue;
            float r[8], wf[8], o[8];
            unpack8(rv[k], r);
            unpack8(wv[k], wf);
#pragma unroll
            for (int e = 0; e < 8; ++e) o[e] = wf[e] * rbf(r[e] * rs);
            st8(out + ro + (size_t)vi * 8, pack8(o));
        }
    }
}

/* Scalar forward for any width: one warp per row, two reads of the row (the second from cache). */
__global__ void rmsnorm_fwd_any(bf16 *out, bf16 *resid_out, float *rstd, const bf16 *x, const bf16 *delta,
                                const bf16 *w, int n, int c, float eps) {
    const long row = (long)blockIdx.x * NORM_WARPS + (threadIdx.x >> 5);
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

template <int G, int K>
static t2_status rmsnorm_fwd_launch(bf16 *out, bf16 *resid_out, float *rstd, const bf16 *x, const bf16 *delta,
                                    const bf16 *w, int n, int c, float eps) {
    int grid = 0;
    T2_CUDA(resident_blocks(rmsnorm_fwd_vec<G, K>, NORM_THREADS, 0, &grid));
    grid = grid < ceil_div(n, NORM_WARPS / G) ? grid : ceil_div(n, NORM_WARPS / G);
    rmsnorm_fwd_vec<G, K><<<grid, NORM_THREADS, 0, t2_stream>>>(out, resid_out, rstd, x, delta, w, n, c, eps);
    T2_LAUNCHED("rmsnorm_fwd_vec");
    return t2_ok();
}

extern "C" t2_status t2_rmsnorm_fwd(void *out, void *resid_out, float *rstd, const void *x, const void *delta,
                                    const void *w, int n, int c, float eps) {
    T2_REQUIRE(n > 0 && c > 0, "t2_rmsnorm_fwd(shape)");
    T2_REQUIRE(delta == NULL || resid_out != NULL, "t2_rmsnorm_fwd(resid_out)");
    bf16 *o = (bf16 *)out, *ro = (bf16 *)resid_out;
    const bf16 *xx = (const bf16 *)x, *dd = (const bf16 *)delta, *ww = (const bf16 *)w;
    int G = 0, K = 0;
    if (norm_shape(c, &G, &K) && aligned16(out) && aligned16(resid_out) && aligned16(x) && aligned16(delta) &&
        aligned16(w)) {
        return norm_dispatch(G, K, "t2_rmsnorm_fwd(norm_shape)", [&](auto g, auto k) {
            return rmsnorm_fwd_launch<decltype(g)::value, decltype(k)::value>(o, ro, rstd, xx, dd, ww, n, c, eps);
        });
    }
    rmsnorm_fwd_any<<<ceil_div(n, NORM_WARPS), NORM_THREADS, 0, t2_stream>>>(o, ro, rstd, xx, dd, ww, n, c, eps);
    T2_LAUNCHED("rmsnorm_fwd_any");
    return t2_ok();
}

/* Backward, vector path: x and dout read once (kept in registers for the second pass), dresid
 * read-modified-written as float4, dw summed per thread in registers over all the block's rows;
 * at the end the block's row groups add their partials into shared memory (c floats) and the block
 * adds that to dw: one global atomic per column per block. A thread owns quads of 4 columns (the
 * K vectors of 8 that norm_shape sized become 2K quads): its bf16 loads are 8 bytes and its fp32
 * ones 16, so every load and store instruction of a warp covers whole 32-byte sectors. With 8
 * columns per thread the fp32 float4 pairs sat 32 bytes apart and each store instruction
 * half-wrote 32 sectors: ncu (H200, 1.7B at 16k tokens) had L2 at 84% of its throughput and DRAM
 * at 74%, 125 µs a call; the quads took the step's 56 calls from 7.7 to 7.0 ms. */
template <int G, int K>
__global__ void __launch_bounds__(NORM_THREADS)
    rmsnorm_bwd_vec(float *dresid, bf16 *dresid_bf16, float *dw, const bf16 *dout, const bf16 *x, const float *rstd,
                    const bf16 *w, int n, int c) {
    extern __shared__ float sdw[];
    __shared__ float sred[2][NORM_WARPS];
    constexpr int GT = 32 * G, RG = NORM_WARPS / G, Q = 2 * K;
    const int grp = threadIdx.x / GT, gt = threadIdx.x % GT, nq = c / 4;
    for (int i = threadIdx.x; i < c; i += NORM_THREADS) sdw[i] = 0.f;
    uint2 wv[Q];
    float acc[Q][4];
#pragma unroll
    for (int j = 0; j < Q; ++j) {
        const int qi = j * GT + gt;
        wv[j] = qi < nq ? ld4(w + (size_t)qi * 4) : make_uint2(0, 0);
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
    }
    int buf = 0;
    for (long base = (long)blockIdx.x * RG; base < n; base += (long)gridDim.x * RG, buf ^= 1) {
        const long row = base + grp;
        const bool ok = row < n;
        const size_t ro = (size_t)row * c;
        const float rs = ok ? rstd[row] : 0.f;
        uint2 xv[Q], gv[Q];
        float4 gr[Q]; /* dresid, loaded with x and dout so all of the row's reads are in flight */
#pragma unroll
        for (int j = 0; j < Q; ++j) {
            const int qi = j * GT + gt;
            const bool on = ok && qi < nq;
            xv[j] = on ? ld4(x + ro + (size_t)qi * 4) : make_uint2(0, 0);
            gv[j] = on ? ld4(dout + ro + (size_t)qi * 4) : make_uint2(0, 0);
            gr[j] = on ? ld4f(dresid + ro + (size_t)qi * 4) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        float dot = 0.f; /* Σ dx̂·x̂ */
#pragma unroll
        for (int j = 0; j < Q; ++j) {
            float xf[4], gf[4], wf[4];
            unpack4(xv[j], xf);
            unpack4(gv[j], gf);
            unpack4(wv[j], wf);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float xh = xf[e] * rs;
                const float dxh = rbf(gf[e] * wf[e]);
                dot += dxh * xh;
                acc[j][e] += gf[e] * rbf(xh);
            }
        }
        dot = group_sum<G>(dot, sred, buf) / (float)c;
        if (!ok) continue;
#pragma unroll
        for (int j = 0; j < Q; ++j) {
            const int qi = j * GT + gt;
            if (qi >= nq) continue;
            float xf[4], gf[4], wf[4];
            unpack4(xv[j], xf);
            unpack4(gv[j], gf);
            unpack4(wv[j], wf);
            float v[4] = {gr[j].x, gr[j].y, gr[j].z, gr[j].w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float xh = xf[e] * rs;
                const float dxh = rbf(gf[e] * wf[e]);
                v[e] = v[e] + rs * (dxh - xh * dot);
            }
            st4f(dresid + ro + (size_t)qi * 4, make_float4(v[0], v[1], v[2], v[3]));
            if (dresid_bf16) st4(dresid_bf16 + ro + (size_t)qi * 4, pack4(v));
        }
    }
    __syncthreads(); /* sdw zeroed */
#pragma unroll
    for (int j = 0; j < Q; ++j) {
        const int qi = j * GT + gt;
        if (qi >= nq) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) atomicAdd(&sdw[qi * 4 + e], acc[j][e]);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < c; i += NORM_THREADS) atomicAdd(&dw[i], sdw[i]);
}

/* Scalar backward for any width c ≤ 12288: one block per row (rows strided by the grid); thread i
 * owns columns i, i + NORM_THREADS, …, whose weight-gradient partials it keeps in shared memory
 * (c floats, no other thread touches them, so no atomics until the final one per column), followed
 * by block_sum's 32 floats. */
__global__ void __launch_bounds__(NORM_THREADS)
    rmsnorm_bwd_any(float *dresid, bf16 *dresid_bf16, float *dw, const bf16 *dout, const bf16 *x, const float *rstd,
                    const bf16 *w, int n, int c) {
    extern __shared__ float sdw[];
    float *sred = sdw + c;
    for (int i = threadIdx.x; i < c; i += NORM_THREADS) sdw[i] = 0.f;
    for (long row = blockIdx.x; row < n; row += gridDim.x) {
        const bf16 *xr = x + (size_t)row * c, *dr = dout + (size_t)row * c;
        const float rs = rstd[row];
        float dot = 0.f; /* Σ dx̂·x̂ */
        for (int i = threadIdx.x; i < c; i += NORM_THREADS) {
            const float xh = __bfloat162float(xr[i]) * rs;
            const float dyi = __bfloat162float(dr[i]);
            const float dxh = rbf(dyi * __bfloat162float(w[i]));
            dot += dxh * xh;
            sdw[i] += dyi * rbf(xh);
        }
        dot = block_sum(dot, sred) / (float)c;
        float *g = dresid + (size_t)row * c;
        bf16 *gb = dresid_bf16 ? dresid_bf16 + (size_t)row * c : nullptr;
        for (int i = threadIdx.x; i < c; i += NORM_THREADS) {
            const float xh = __bfloat162float(xr[i]) * rs;
            const float dxh = rbf(__bfloat162float(dr[i]) * __bfloat162float(w[i]));
            const float v = g[i] + rs * (dxh - xh * dot);
            g[i] = v;
            if (gb) gb[i] = __float2bfloat16(v);
        }
    }
    for (int i = threadIdx.x; i < c; i += NORM_THREADS) atomicAdd(&dw[i], sdw[i]);
}

template <int G, int K>
static t2_status rmsnorm_bwd_launch(float *dresid, bf16 *dresid_bf16, float *dw, const bf16 *dout, const bf16 *x,
                                    const float *rstd, const bf16 *w, int n, int c) {
    const size_t smem = (size_t)c * sizeof(float); /* ≤ 32 KiB: c ≤ 8192 here */
    int grid = 0;
    T2_CUDA(resident_blocks(rmsnorm_bwd_vec<G, K>, NORM_THREADS, smem, &grid));
    grid = grid < ceil_div(n, NORM_WARPS / G) ? grid : ceil_div(n, NORM_WARPS / G);
    rmsnorm_bwd_vec<G, K><<<grid, NORM_THREADS, smem, t2_stream>>>(dresid, dresid_bf16, dw, dout, x, rstd, w, n, c);
    T2_LAUNCHED("rmsnorm_bwd_vec");
    return t2_ok();
}

extern "C" t2_status t2_rmsnorm_bwd(float *dresid, void *dresid_bf16, float *dw, const void *dout, const void *x,
                                    const float *rstd, const void *w, int n, int c) {
    T2_REQUIRE(n > 0 && c > 0 && c <= 12288, "t2_rmsnorm_bwd(shape)");
    bf16 *gb = (bf16 *)dresid_bf16;
    const bf16 *dy = (const bf16 *)dout, *xx = (const bf16 *)x, *ww = (const bf16 *)w;
    int G = 0, K = 0;
    if (norm_shape(c, &G, &K) && aligned16(dresid) && aligned16(dresid_bf16) && aligned16(dout) && aligned16(x) &&
        aligned16(w)) {
        return norm_dispatch(G, K, "t2_rmsnorm_bwd(norm_shape)", [&](auto g, auto k) {
            return rmsnorm_bwd_launch<decltype(g)::value, decltype(k)::value>(dresid, gb, dw, dy, xx, rstd, ww, n, c);
        });
    }
    const size_t smem = (size_t)(c + 32) * sizeof(float);
    if (smem > 48 * 1024)
        T2_CUDA(cudaFuncSetAttribute(rmsnorm_bwd_any, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int grid = 0;
    T2_CUDA(resident_blocks(rmsnorm_bwd_any, NORM_THREADS, smem, &grid));
    grid = grid < n ? grid : n;
    rmsnorm_bwd_any<<<grid, NORM_THREADS, smem, t2_stream>>>(dresid, gb, dw, dy, xx, rstd, ww, n, c);
    T2_LAUNCHED("rmsnorm_bwd_any");
    return t2_ok();
}

/* ------------------------------------------------------------------------------------------------ */
/* q/k head norm + RoPE. Heads 0..nh-1 of a token are its q heads, nh..nh+nkv-1 its k heads (they
 * follow the q heads in the qkv row); the rotate-half pairs of a head are (j, j + d/2), j < d/2. */

#define QK_MAX_HALF 128 /* head_dim ≤ 256 */

__device__ __forceinline__ float rope_inv_freq(int j, int d, float theta) {
    /* torch: 1.0 / (base ** (arange(0, d, 2).float() / d)), each step rounded to fp32 */
    const float e = (float)(2 * j) / (float)d;
    const float p = (float)pow((double)theta, (double)e);
    return 1.0f / p;
}

/* qk_block_init fills a block's shared inv_freq (d/2 values, d = 16·P) and the q_norm / k_norm
 * weights as fp32; every thread calls it (it ends with a barrier). */
template <int P>
__device__ __forceinline__ void qk_block_init(float *sinv, float (*sw)[16 * P], const bf16 *qw, const bf16 *kw,
                                              float theta) {
    for (int j = threadIdx.x; j < 8 * P; j += NORM_THREADS) sinv[j] = rope_inv_freq(j, 16 * P, theta);
    for (int j = threadIdx.x; j < 16 * P; j += NORM_THREADS) {
        sw[0][j] = __bfloat162float(qw[j]);
        sw[1][j] = __bfloat162float(kw[j]);
    }
    __syncthreads();
}

/* rope_table writes the bf16-rounded cos and sin of pos·inv_freq[j], j < HALF, into the calling
 * warp's rows cs, sn of shared memory: one sincosf per (token, j), shared by all the token's heads.
 * The whole warp must call it; the first __syncwarp orders it after the reads of the last token. */
template <int HALF>
__device__ __forceinline__ void rope_table(float *cs, float *sn, const float *sinv, float pos) {
    __syncwarp();
#pragma unroll 1
    for (int j = threadIdx.x & 31; j < HALF; j += 32) {
        float c, sv;
        sincosf(pos * sinv[j], &sv, &c);
        cs[j] = rbf(c);
        sn[j] = rbf(sv);
    }
    __syncwarp();
}

/* the 8 fp32 values at p (32-byte aligned shared memory) */
__device__ __forceinline__ void lds8(const float *p, float f[8]) {
    const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

/* 16-byte paths, d = 16·P with P a power of two ≤ 16 (d ∈ {16, 32, 64, 128, 256}): one warp per
 * token (tokens strided by the grid). Lane l takes the pairs j0 … j0+7, j0 = 8·(l mod P), of heads
 * l/P, l/P + 32/P, …: its angles are the same for every head of the token, so cos/sin are computed
 * once per (token, j) into a per-warp table (rope_table) instead of once per head. A head's sums
 * run over its P lanes (aligned groups, xor shuffles). Two heads per lane are loaded before either
 * is used. inv_freq and the two weight vectors sit in shared memory (fp32), which keeps registers
 * for loads in flight. */
template <int P>
__global__ void __launch_bounds__(NORM_THREADS)
    qknorm_rope_fwd_vec(bf16 *qout, bf16 *kout, float *rstd_q, float *rstd_k, const bf16 *qkv, const bf16 *qw,
                        const bf16 *kw, const int32_t *positions, int n, int nh, int nkv, float eps, float theta) {
    constexpr int HALF = 8 * P, D = 16 * P, HPS = 32 / P; /* HPS: heads per warp step */
    __shared__ __align__(32) float sinv[HALF];
    __shared__ __align__(32) float sw[2][D]; /* q_norm, k_norm weights */
    __shared__ __align__(32) float scs[NORM_WARPS][HALF], ssn[NORM_WARPS][HALF];
    qk_block_init<P>(sinv, sw, qw, kw, theta);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane / P, j0 = (lane % P) * 8;
    const int heads = nh + nkv;
    const size_t stride = (size_t)(nh + 2 * nkv) * D;
    for (long t = (long)blockIdx.x * NORM_WARPS + warp; t < n; t += (long)gridDim.x * NORM_WARPS) {
        const float pos = (float)positions[t];
        float cs[8], sn[8];
        rope_table<HALF>(scs[warp], ssn[warp], sinv, pos);
        lds8(scs[warp] + j0, cs);
        lds8(ssn[warp] + j0, sn);
        const bf16 *src = qkv + (size_t)t * stride;
        for (int h0 = 0; h0 < heads; h0 += 2 * HPS) {
            uint4 a[2], b[2];
#pragma unroll
            for (int s = 0; s < 2; ++s) {
                const int hd = h0 + s * HPS + sub;
                a[s] = hd < heads ? ld8(src + (size_t)hd * D + j0) : make_uint4(0, 0, 0, 0);
                b[s] = hd < heads ? ld8(src + (size_t)hd * D + HALF + j0) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int s = 0; s < 2; ++s) {
                const int hd = h0 + s * HPS + sub;
                float x1[8], x2[8];
                unpack8(a[s], x1);
                unpack8(b[s], x2);
                float ss = 0.f;
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    ss += x1[e] * x1[e];
                    ss += x2[e] * x2[e];
                }
#pragma unroll
                for (int o = P / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
                const float rs = rsqrtf(ss / (float)D + eps);
                if (hd >= heads) continue;
                const bool isq = hd < nh;
                if (lane % P == 0) {
                    if (isq) rstd_q[(size_t)t * nh + hd] = rs;
                    else rstd_k[(size_t)t * nkv + (hd - nh)] = rs;
                }
                float w1[8], w2[8], o1[8], o2[8];
                lds8(sw[isq ? 0 : 1] + j0, w1);
                lds8(sw[isq ? 0 : 1] + HALF + j0, w2);
#pragma unroll
                for (int e = 0; e < 8; ++e) { /* the roundings in pairs (rbf2), bit-identical to rbf */
                    float n1 = x1[e] * rs, n2 = x2[e] * rs;
                    rbf2(n1, n2);
                    float y1 = w1[e] * n1, y2 = w2[e] * n2;
                    rbf2(y1, y2);
                    float a = y1 * cs[e], b = -y2 * sn[e], c = y2 * cs[e], d = y1 * sn[e];
                    rbf2(a, b);
                    rbf2(c, d);
                    o1[e] = a + b;
                    o2[e] = c + d;
                }
                bf16 *dst = isq ? qout + ((size_t)t * nh + hd) * D : kout + ((size_t)t * nkv + (hd - nh)) * D;
                st8(dst + j0, pack8(o1));
                st8(dst + HALF + j0, pack8(o2));
            }
        }
    }
}

/* Scalar forward for any even d ≤ 256: one warp per (token, head); lane handles the pairs
 * j = lane, lane+32, … < d/2. */
__global__ void qknorm_rope_fwd_any(bf16 *qout, bf16 *kout, float *rstd_q, float *rstd_k, const bf16 *qkv,
                                    const bf16 *qw, const bf16 *kw, const int32_t *positions, int n, int nh, int nkv,
                                    int d, float eps, float theta) {
    __shared__ float inv_freq[QK_MAX_HALF];
    const int half = d / 2;
    for (int j = threadIdx.x; j < half; j += blockDim.x) inv_freq[j] = rope_inv_freq(j, d, theta);
    __syncthreads();
    const long wid = (long)blockIdx.x * NORM_WARPS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    const int heads = nh + nkv;
    if (wid >= (long)n * heads) return;
    const long t = wid / heads;
    const int hd = (int)(wid - t * heads);
    const bool isq = hd < nh;
    const size_t stride = (size_t)(nh + 2 * nkv) * d;
    const bf16 *src = qkv + (size_t)t * stride + (size_t)hd * d;
    const bf16 *w = isq ? qw : kw;
    bf16 *dst = isq ? qout + ((size_t)t * nh + hd) * d : kout + ((size_t)t * nkv + (hd - nh)) * d;
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
        float c, sv;
        sincosf(pos * inv_freq[j], &sv, &c);
        const float cs = rbf(c), sn = rbf(sv);
        dst[j] = __float2bfloat16(rbf(x1 * cs) + rbf(-x2 * sn));
        dst[j + half] = __float2bfloat16(rbf(x2 * cs) + rbf(x1 * sn));
    }
}

/* qk_vec_p: P for the 16-byte paths (d = 16·P, P ∈ {1, 2, 4, 8, 16}), or 0 when d has no such P. */
static int qk_vec_p(int d) {
    for (int p = 1; p <= 16; p *= 2)
        if (d == 16 * p) return p;
    return 0;
}

template <int P>
static t2_status qknorm_rope_fwd_launch(bf16 *qout, bf16 *kout, float *rstd_q, float *rstd_k, const bf16 *qkv,
                                        const bf16 *qw, const bf16 *kw, const int32_t *positions, int n, int nh,
                                        int nkv, float eps, float theta) {
    int grid = 0;
    T2_CUDA(resident_blocks(qknorm_rope_fwd_vec<P>, NORM_THREADS, 0, &grid));
    grid = grid < ceil_div(n, NORM_WARPS) ? grid : ceil_div(n, NORM_WARPS);
    qknorm_rope_fwd_vec<P><<<grid, NORM_THREADS, 0, t2_stream>>>(qout, kout, rstd_q, rstd_k, qkv, qw, kw, positions, n, nh, nkv, eps,
                                                   theta);
    T2_LAUNCHED("qknorm_rope_fwd_vec");
    return t2_ok();
}

extern "C" t2_status t2_qknorm_rope_fwd(void *qout, void *kout, float *rstd_q, float *rstd_k, const void *qkv,
                                        const void *qw, const void *kw, const int32_t *positions, int n, int nh,
                                        int nkv, int d, float eps, float theta) {
    T2_REQUIRE(n > 0 && nh > 0 && nkv > 0 && d > 0 && d % 2 == 0 && d / 2 <= QK_MAX_HALF,
               "t2_qknorm_rope_fwd(shape)");
    bf16 *qo = (bf16 *)qout, *ko = (bf16 *)kout;
    const bf16 *src = (const bf16 *)qkv, *wq = (const bf16 *)qw, *wk = (const bf16 *)kw;
    if (aligned16(qout) && aligned16(kout) && aligned16(qkv)) {
        switch (qk_vec_p(d)) {
        case 1: return qknorm_rope_fwd_launch<1>(qo, ko, rstd_q, rstd_k, src, wq, wk, positions, n, nh, nkv, eps, theta);
        case 2: return qknorm_rope_fwd_launch<2>(qo, ko, rstd_q, rstd_k, src, wq, wk, positions, n, nh, nkv, eps, theta);
        case 4: return qknorm_rope_fwd_launch<4>(qo, ko, rstd_q, rstd_k, src, wq, wk, positions, n, nh, nkv, eps, theta);
        case 8: return qknorm_rope_fwd_launch<8>(qo, ko, rstd_q, rstd_k, src, wq, wk, positions, n, nh, nkv, eps, theta);
        case 16:
            return qknorm_rope_fwd_launch<16>(qo, ko, rstd_q, rstd_k, src, wq, wk, positions, n, nh, nkv, eps, theta);
        }
    }
    const long warps = (long)n * (nh + nkv);
    qknorm_rope_fwd_any<<<(int)((warps + NORM_WARPS - 1) / NORM_WARPS), NORM_THREADS, 0, t2_stream>>>(
        qo, ko, rstd_q, rstd_k, src, wq, wk, positions, n, nh, nkv, d, eps, theta);
    T2_LAUNCHED("qknorm_rope_fwd_any");
    return t2_ok();
}

/* qk_flush adds a warp's q_norm or k_norm weight-gradient partials acc (columns j0…j0+7, then
 * HALF+j0…HALF+j0+7 of each lane) to the block's sums sd and clears them: lanes l, l+P, l+2P, … own
 * the same columns, so their partials are folded into lanes 0…P-1 first. The whole warp calls it. */
template <int P>
__device__ __forceinline__ void qk_flush(float acc[16], float *sd, int lane, int j0) {
#pragma unroll
    for (int o = P; o < 32; o <<= 1) {
#pragma unroll
        for (int e = 0; e < 16; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
    }
    if (lane < P) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            atomicAdd(&sd[j0 + e], acc[e]);
            atomicAdd(&sd[8 * P + j0 + e], acc[8 + e]);
        }
    }
#pragma unroll
    for (int e = 0; e < 16; ++e) acc[e] = 0.f;
}

/* Backward, 16-byte paths (the forward's lane layout): dxn from the RoPE transpose, then the
 * RMSNorm backward over the head. A warp's work items are (token, q heads) for items i < n and
 * (token, k heads) for n ≤ i < 2n, strided by the grid, so a warp meets its q items first, then its
 * k items: its 16 weight-gradient columns per lane are summed in registers over all the items of
 * one kind and flushed once at the switch and once at the end (qk_flush); the block then adds
 * its sums to dqw / dkw once. */
template <int P>
__global__ void __launch_bounds__(NORM_THREADS)
    qknorm_rope_bwd_vec(bf16 *dqkv, float *dqw, float *dkw, const float *dq, const bf16 *dk, const bf16 *qkv,
                        const float *rstd_q, const float *rstd_k, const bf16 *qw, const bf16 *kw,
                        const int32_t *positions, int n, int nh, int nkv, float theta) {
    constexpr int HALF = 8 * P, D = 16 * P, HPS = 32 / P;
    __shared__ __align__(32) float sinv[HALF];
    __shared__ __align__(32) float sw[2][D];
    __shared__ __align__(32) float scs[NORM_WARPS][HALF], ssn[NORM_WARPS][HALF];
    __shared__ float sdw[2][D];
    for (int j = threadIdx.x; j < 2 * D; j += NORM_THREADS) sdw[j / D][j % D] = 0.f;
    qk_block_init<P>(sinv, sw, qw, kw, theta);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane / P, j0 = (lane % P) * 8;
    const size_t stride = (size_t)(nh + 2 * nkv) * D;
    float acc[16]; /* partials of sdw[kind]: 0 = q_norm, 1 = k_norm */
#pragma unroll
    for (int e = 0; e < 16; ++e) acc[e] = 0.f;
    int kind = 0;
    for (long i = (long)blockIdx.x * NORM_WARPS + warp; i < 2L * n; i += (long)gridDim.x * NORM_WARPS) {
        const int ik = i < n ? 0 : 1;
        if (ik != kind) {
            qk_flush<P>(acc, sdw[kind], lane, j0);
            kind = ik;
        }
        const long t = ik ? i - n : i;
        const int h_lo = ik ? nh : 0, nheads = ik ? nkv : nh; /* the item's heads in the qkv row */
        const bf16 *gk = dk + (size_t)t * nkv * D;   /* k items: bf16 gradient */
        const float *gq = dq + (size_t)t * nh * D;   /* q items: fp32, rounded to bf16 as it is packed */
        const float *rsp = ik ? rstd_k + (size_t)t * nkv : rstd_q + (size_t)t * nh;
        const bf16 *src = qkv + (size_t)t * stride + (size_t)h_lo * D;
        bf16 *out = dqkv + (size_t)t * stride + (size_t)h_lo * D;
        float cs[8], sn[8];
        rope_table<HALF>(scs[warp], ssn[warp], sinv, (float)positions[t]);
        lds8(scs[warp] + j0, cs);
        lds8(ssn[warp] + j0, sn);
        for (int h0 = 0; h0 < nheads; h0 += 2 * HPS) {
            uint4 ga[2], gb[2], xa[2], xb[2];
            float rs[2];
#pragma unroll
            for (int s = 0; s < 2; ++s) {
                const int h = h0 + s * HPS + sub;
                const bool on = h < nheads;
                ga[s] = !on ? make_uint4(0, 0, 0, 0)
                        : ik    ? ld8(gk + (size_t)h * D + j0)
                                : ld8f(gq + (size_t)h * D + j0);
                gb[s] = !on ? make_uint4(0, 0, 0, 0)
                        : ik    ? ld8(gk + (size_t)h * D + HALF + j0)
                                : ld8f(gq + (size_t)h * D + HALF + j0);
                xa[s] = on ? ld8(src + (size_t)h * D + j0) : make_uint4(0, 0, 0, 0);
                xb[s] = on ? ld8(src + (size_t)h * D + HALF + j0) : make_uint4(0, 0, 0, 0);
                rs[s] = on ? rsp[h] : 0.f;
            }
#pragma unroll
            for (int s = 0; s < 2; ++s) {
                const int h = h0 + s * HPS + sub;
                float g1[8], g2[8], x1[8], x2[8], w1[8], w2[8];
                unpack8(ga[s], g1);
                unpack8(gb[s], g2);
                unpack8(xa[s], x1);
                unpack8(xb[s], x2);
                lds8(sw[ik] + j0, w1);
                lds8(sw[ik] + HALF + j0, w2);
                float dot = 0.f; /* Σ dx̂·x̂ */
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float dxn1 = g1[e] * cs[e] + g2[e] * sn[e];
                    const float dxn2 = -g1[e] * sn[e] + g2[e] * cs[e];
                    const float xh1 = x1[e] * rs[s], xh2 = x2[e] * rs[s];
                    float r1 = xh1, r2 = xh2;
                    rbf2(r1, r2);
                    acc[e] += dxn1 * r1;
                    acc[8 + e] += dxn2 * r2;
                    const float dxh1 = dxn1 * w1[e], dxh2 = dxn2 * w2[e];
                    dot += dxh1 * xh1 + dxh2 * xh2;
                }
#pragma unroll
                for (int o = P / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
                dot /= (float)D;
                if (h >= nheads) continue;
                float o1[8], o2[8];
#pragma unroll
                for (int e = 0; e < 8; ++e) {
                    const float dxh1 = (g1[e] * cs[e] + g2[e] * sn[e]) * w1[e];
                    const float dxh2 = (-g1[e] * sn[e] + g2[e] * cs[e]) * w2[e];
                    const float xh1 = x1[e] * rs[s], xh2 = x2[e] * rs[s];
                    o1[e] = rs[s] * (dxh1 - xh1 * dot);
                    o2[e] = rs[s] * (dxh2 - xh2 * dot);
                }
                st8(out + (size_t)h * D + j0, pack8(o1));
                st8(out + (size_t)h * D + HALF + j0, pack8(o2));
            }
        }
    }
    qk_flush<P>(acc, sdw[kind], lane, j0);
    __syncthreads();
    for (int j = threadIdx.x; j < D; j += NORM_THREADS) {
        atomicAdd(&dqw[j], sdw[0][j]);
        atomicAdd(&dkw[j], sdw[1][j]);
    }
}

/* Scalar backward for any even d ≤ 256: one warp per (token, head), blocks striding over them;
 * the weight gradients are summed per block in shared memory. */
__global__ void qknorm_rope_bwd_any(bf16 *dqkv, float *dqw, float *dkw, const float *dq, const bf16 *dk,
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
    const size_t stride = (size_t)(nh + 2 * nkv) * d;
    const long total = (long)n * heads;
    const long step = (long)gridDim.x * NORM_WARPS;
    for (long wid = (long)blockIdx.x * NORM_WARPS + (threadIdx.x >> 5); wid < total; wid += step) {
        const long t = wid / heads;
        const int hd = (int)(wid - t * heads);
        const bool isq = hd < nh;
        const bf16 *src = qkv + (size_t)t * stride + (size_t)hd * d;
        const bf16 *w = isq ? qw : kw;
        const float *gq = dq + ((size_t)t * nh + hd) * d;
        const bf16 *gk = dk + ((size_t)t * nkv + (hd - nh)) * d;
        auto gy = [&](int j) { return isq ? rbf(gq[j]) : __bfloat162float(gk[j]); }; /* bf16 values */
        const float rs = isq ? rstd_q[(size_t)t * nh + hd] : rstd_k[(size_t)t * nkv + (hd - nh)];
        const float pos = (float)positions[t];
        float *sw = sdw[isq ? 0 : 1];
        /* pass 1: dxn (RoPE transpose), dw, and Σ dx̂·x̂ */
        float dot = 0.f;
        for (int j = lane; j < half; j += 32) {
            float c, sv;
            sincosf(pos * inv_freq[j], &sv, &c);
            const float cs = rbf(c), sn = rbf(sv);
            const float g1 = gy(j), g2 = gy(j + half);
            const float dxn1 = g1 * cs + g2 * sn;
            const float dxn2 = -g1 * sn + g2 * cs;
            const float xh1 = __bfloat162float(src[j]) * rs, xh2 = __bfloat162float(src[j + half]) * rs;
            atomicAdd(&sw[j], dxn1 * rbf(xh1));
            atomicAdd(&sw[j + half], dxn2 * rbf(xh2));
            const float dxh1 = dxn1 * __bfloat162float(w[j]), dxh2 = dxn2 * __bfloat162float(w[j + half]);
            dot += dxh1 * xh1 + dxh2 * xh2;
        }
        dot = warp_sum(dot) / (float)d;
        bf16 *out = dqkv + (size_t)t * stride + (size_t)hd * d;
        for (int j = lane; j < half; j += 32) {
            float c, sv;
            sincosf(pos * inv_freq[j], &sv, &c);
            const float cs = rbf(c), sn = rbf(sv);
            const float g1 = gy(j), g2 = gy(j + half);
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

template <int P>
static t2_status qknorm_rope_bwd_launch(bf16 *dqkv, float *dqw, float *dkw, const float *dq, const bf16 *dk,
                                        const bf16 *qkv, const float *rstd_q, const float *rstd_k, const bf16 *qw,
                                        const bf16 *kw, const int32_t *positions, int n, int nh, int nkv,
                                        float theta) {
    int grid = 0;
    T2_CUDA(resident_blocks(qknorm_rope_bwd_vec<P>, NORM_THREADS, 0, &grid));
    grid = grid < ceil_div(2L * n, NORM_WARPS) ? grid : ceil_div(2L * n, NORM_WARPS);
    qknorm_rope_bwd_vec<P><<<grid, NORM_THREADS, 0, t2_stream>>>(dqkv, dqw, dkw, dq, dk, qkv, rstd_q, rstd_k, qw, kw, positions, n,
                                                   nh, nkv, theta);
    T2_LAUNCHED("qknorm_rope_bwd_vec");
    return t2_ok();
}

extern "C" t2_status t2_qknorm_rope_bwd(void *dqkv, float *dqw, float *dkw, const float *dq, const void *dk,
                                        const void *qkv, const float *rstd_q, const float *rstd_k, const void *qw,
                                        const void *kw, const int32_t *positions, int n, int nh, int nkv, int d,
                                        float theta) {
    T2_REQUIRE(n > 0 && nh > 0 && nkv > 0 && d > 0 && d % 2 == 0 && d / 2 <= QK_MAX_HALF,
               "t2_qknorm_rope_bwd(shape)");
    bf16 *g = (bf16 *)dqkv;
    const float *gq = dq;
    const bf16 *gk = (const bf16 *)dk, *src = (const bf16 *)qkv;
    const bf16 *wq = (const bf16 *)qw, *wk = (const bf16 *)kw;
    if (aligned16(dqkv) && aligned16(dq) && aligned16(dk) && aligned16(qkv)) {
        switch (qk_vec_p(d)) {
        case 1:
            return qknorm_rope_bwd_launch<1>(g, dqw, dkw, gq, gk, src, rstd_q, rstd_k, wq, wk, positions, n, nh, nkv,
                                             theta);
        case 2:
            return qknorm_rope_bwd_launch<2>(g, dqw, dkw, gq, gk, src, rstd_q, rstd_k, wq, wk, positions, n, nh, nkv,
                                             theta);
        case 4:
            return qknorm_rope_bwd_launch<4>(g, dqw, dkw, gq, gk, src, rstd_q, rstd_k, wq, wk, positions, n, nh, nkv,
                                             theta);
        case 8:
            return qknorm_rope_bwd_launch<8>(g, dqw, dkw, gq, gk, src, rstd_q, rstd_k, wq, wk, positions, n, nh, nkv,
                                             theta);
        case 16:
            return qknorm_rope_bwd_launch<16>(g, dqw, dkw, gq, gk, src, rstd_q, rstd_k, wq, wk, positions, n, nh, nkv,
                                              theta);
        }
    }
    const long warps = (long)n * (nh + nkv);
    long blocks = (warps + NORM_WARPS - 1) / NORM_WARPS;
    if (blocks > 1024) blocks = 1024;
    qknorm_rope_bwd_any<<<(int)blocks, NORM_THREADS, 0, t2_stream>>>(g, dqw, dkw, gq, gk, src, rstd_q, rstd_k, wq, wk, positions, n,
                                                       nh, nkv, d, theta);
    T2_LAUNCHED("qknorm_rope_bwd_any");
    return t2_ok();
}
