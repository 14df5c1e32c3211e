/*
 * attention.cu: flash-style attention over a packed prefix-tree micro-batch, forward and backward.
 *
 * Mask (the trainer's representation, no N×N matrix anywhere): key j is visible to query i iff
 * j ≤ i ≤ subtree_end[j]. In depth-first order the visible keys of i are exactly its ancestors and
 * itself, a subset of [0, i]. Work is tiled in 64×64 (query × key) tiles; a key block is skipped
 * when max(subtree_end) over its 64 keys is below the first query of the tile (blockmax), which for
 * packed independent sequences skips every other sequence, and for a tree skips finished subtrees.
 *
 * Matrix products use the tensor cores through WMMA (bf16 operands, fp32 accumulation) with every
 * tile staged in shared memory; the online softmax runs in fp32 in the base-2 domain (scores are
 * pre-multiplied by log2(e)/sqrt(d)), so lse is stored as a base-2 logarithm.
 *
 * Each of the 4 warps of a block owns 16 query rows of the tile (forward, dQ) or 16 key rows (dK/dV),
 * so most steps need only __syncwarp; shared K/V/Q tiles are guarded by __syncthreads.
 *
 * These are the first kernels (T2_ATT_WMMA); attention_fa2.cu holds the FlashAttention-2-style ones
 * (T2_ATT_FA2 and T2_ATT_FA2_DET) and attention_sm90_fwd.cu / attention_sm90_bwd.cu the Hopper ones
 * (T2_ATT_HOPPER), which the public entry points below dispatch to.
 *
 * Backward is split in two deterministic kernels (no atomics): one per key block accumulating dK, dV
 * over the query blocks that can see it (and over the query heads of its GQA group), one per query
 * block accumulating dQ over visible key blocks, both recomputing P from the saved lse.
 * defines: t2_tree_blockmax, t2_attention_fwd, t2_attention_bwd
 */
#include "common.cuh"
#include "attention_impl.h"
#include <mma.h>
#include <stdint.h>
#include <math.h>

using namespace nvcuda;

#define ATT_B 64       /* rows of a query tile and of a key tile */
#define ATT_THREADS 128 /* 4 warps, 16 rows each */
/* Shared-memory rows are padded (16 bytes for bf16 tiles and P, 16 bytes for fp32 tiles) so the
 * 8 rows one tensor-core fragment load touches fall in different banks; unpadded 256-byte rows
 * made every fragment load an 8-way bank conflict. */
#define SLD (ATT_B + 4) /* fp32 64×64 tiles (S, dP) */
#define PLD (2 * SLD)   /* bf16 64×64 tiles (P, dS), written in place over the rows of S and dP */
template <int D> struct Ld {
    static constexpr int k = D + 8; /* bf16 64×D tiles (Q, K, V, dO) */
    static constexpr int o = D + 4; /* fp32 64×D tiles (O accumulator, staging) */
};

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> frag_a_row;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major> frag_a_col;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_acc;

/* ------------------------------------------------------------------------------------------------ */
/* tile loads: 64 rows × D bf16 with 16-byte vectors; rows ≥ n are zero-filled */

template <int D>
__device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src, int stride, int row0, int n) {
    const int vec_per_row = D / 8;
    for (int idx = threadIdx.x; idx < ATT_B * vec_per_row; idx += ATT_THREADS) {
        int r = idx / vec_per_row, c8 = idx - r * vec_per_row;
        int4 val = make_int4(0, 0, 0, 0);
        if (row0 + r < n) val = *reinterpret_cast<const int4 *>(src + (size_t)(row0 + r) * stride + c8 * 8);
        *reinterpret_cast<int4 *>(dst + r * Ld<D>::k + c8 * 8) = val;
    }
}

/* S[16w.., 0..63] = A[16w.., :] · B[0..63, :]ᵀ for the calling warp's 16 rows (A, B: 64×D row-major) */
template <int D>
__device__ __forceinline__ void warp_abt(float *S, const bf16 *A, const bf16 *B, int warp) {
#pragma unroll
    for (int j = 0; j < ATT_B / 16; ++j) {
        frag_acc acc;
        wmma::fill_fragment(acc, 0.f);
#pragma unroll
        for (int kk = 0; kk < D; kk += 16) {
            frag_a_row a;
            frag_b_col b;
            wmma::load_matrix_sync(a, A + (warp * 16) * Ld<D>::k + kk, Ld<D>::k);
            wmma::load_matrix_sync(b, B + (j * 16) * Ld<D>::k + kk, Ld<D>::k);
            wmma::mma_sync(acc, a, b, acc);
        }
        wmma::store_matrix_sync(S + (warp * 16) * SLD + j * 16, acc, SLD, wmma::mem_row_major);
    }
}

/* ------------------------------------------------------------------------------------------------ */

__global__ void blockmax_kernel(int32_t *blockmax, const int32_t *subtree_end, int n) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    int nb = (n + ATT_B - 1) / ATT_B;
    if (b >= nb) return;
    int mx = -1, mn = INT32_MAX;
    for (int j = b * ATT_B; j < min(n, (b + 1) * ATT_B); ++j) {
        mx = max(mx, subtree_end[j]);
        mn = min(mn, subtree_end[j]);
    }
    blockmax[b] = mx;
    blockmax[nb + b] = mn;
}

/* Work orders for the Hopper kernels' 128-row blocks, longest first (one block of 1024 threads):
 * a grid runs its blocks roughly in launch order, so a long block launched last is a tail the
 * whole GPU waits for — in a chain the first keys are seen by every later query, the last queries
 * see every earlier key, and launching those first took the backward from 432 to 483 TFLOP/s on
 * 16k tokens of 4,096-token chains (H200). The forward's cost of query block i is the number of 64-key
 * blocks some of its rows see; the backward's of key block i the span of queries that may see it.
 * Ties keep index order. More than WORK_MAX blocks: the forward's default order (last rows first)
 * and the backward's (first keys first). */
#define WORK_MAX 4096
__global__ void __launch_bounds__(1024) work_order_kernel(int32_t *order_fwd, int32_t *order_bwd,
                                                          const int32_t *bmax, int n) {
    __shared__ int cf[WORK_MAX], cb[WORK_MAX];
    const int nb64 = (n + ATT_B - 1) / ATT_B, nb = (n + 127) / 128;
    if (nb > WORK_MAX) {
        for (int i = threadIdx.x; i < nb; i += blockDim.x) {
            order_fwd[i] = nb - 1 - i;
            order_bwd[i] = i;
        }
        return;
    }
    for (int i = threadIdx.x; i < nb; i += blockDim.x) {
        const int q0 = i * 128, last = min(q0 + 127, n - 1) / ATT_B;
        int c = 0;
        for (int b = 0; b <= last; ++b) c += bmax[b] >= q0;
        cf[i] = c;
        const int mx = max(bmax[2 * i], 2 * i + 1 < nb64 ? bmax[2 * i + 1] : -1);
        cb[i] = max(0, mx - q0 + 1);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nb; i += blockDim.x) {
        int rf = 0, rb = 0;
        for (int j = 0; j < nb; ++j) {
            rf += cf[j] > cf[i] || (cf[j] == cf[i] && j < i);
            rb += cb[j] > cb[i] || (cb[j] == cb[i] && j < i);
        }
        order_fwd[rf] = i;
        order_bwd[rb] = i;
    }
}

extern "C" size_t t2_tree_blockmax_bytes(int n) {
    return sizeof(int32_t) * (t2_work_order_at(n, 1) + (size_t)ceil_div(n, 128));
}

extern "C" t2_status t2_tree_blockmax(int32_t *blockmax, const int32_t *subtree_end, int n) {
    T2_REQUIRE(n > 0, "t2_tree_blockmax(n)");
    int nb = ceil_div(n, ATT_B);
    blockmax_kernel<<<ceil_div(nb, 128), 128, 0, t2_stream>>>(blockmax, subtree_end, n);
    T2_LAUNCHED("blockmax_kernel");
    work_order_kernel<<<1, 1024, 0, t2_stream>>>(blockmax + t2_work_order_at(n, 0), blockmax + t2_work_order_at(n, 1),
                                                 blockmax, n);
    T2_LAUNCHED("work_order_kernel");
    return t2_ok();
}

/* ------------------------------------------------------------------------------------------------ */
/* forward */

template <int D>
struct FwdSmem {
    static constexpr size_t q = 0;
    static constexpr size_t k = q + ATT_B * Ld<D>::k * 2;
    static constexpr size_t v = k + ATT_B * Ld<D>::k * 2;
    static constexpr size_t s = v + ATT_B * Ld<D>::k * 2; /* fp32 64×64 scores, then bf16 P in place */
    static constexpr size_t o = s + ATT_B * SLD * 4;      /* fp32 64×D output accumulator */
    static constexpr size_t m = o + ATT_B * Ld<D>::o * 4; /* fp32 row max */
    static constexpr size_t l = m + ATT_B * 4;           /* fp32 row sum */
    static constexpr size_t end = l + ATT_B * 4;         /* int32 subtree_end of the key tile */
    static constexpr size_t bytes = end + ATT_B * 4;
};

template <int D>
__global__ void __launch_bounds__(ATT_THREADS) attention_fwd_kernel(
    bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int qs, int ks, int vs,
    const int32_t *subtree_end, const int32_t *blockmax, int n, int nh, int group, float scale_log2) {
    extern __shared__ __align__(128) unsigned char smem[];
    typedef FwdSmem<D> L;
    bf16 *sQ = (bf16 *)(smem + L::q), *sK = (bf16 *)(smem + L::k), *sV = (bf16 *)(smem + L::v);
    float *sS = (float *)(smem + L::s), *sO = (float *)(smem + L::o);
    bf16 *sP = (bf16 *)(smem + L::s); /* row r of P overwrites the first half of row r of S */
    float *sM = (float *)(smem + L::m), *sL = (float *)(smem + L::l);
    int *sEnd = (int *)(smem + L::end);

    const int qb = blockIdx.x, h = blockIdx.y, g = h / group;
    const int q0 = qb * ATT_B;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    load_tile<D>(sQ, q + h * D, qs, q0, n);
    for (int i = threadIdx.x; i < ATT_B * Ld<D>::o; i += ATT_THREADS) sO[i] = 0.f;
    for (int i = threadIdx.x; i < ATT_B; i += ATT_THREADS) {
        sM[i] = -INFINITY;
        sL[i] = 0.f;
    }

    for (int kb = 0; kb <= qb; ++kb) {
        if (blockmax[kb] < q0) continue; /* no key of this block is visible to any query of the tile */
        const int k0 = kb * ATT_B;
        __syncthreads(); /* previous tile's K/V reads are done (and the initial stores are visible) */
        load_tile<D>(sK, k + g * D, ks, k0, n);
        load_tile<D>(sV, v + g * D, vs, k0, n);
        for (int i = threadIdx.x; i < ATT_B; i += ATT_THREADS) sEnd[i] = k0 + i < n ? subtree_end[k0 + i] : -1;
        __syncthreads();

        warp_abt<D>(sS, sQ, sK, warp);
        __syncwarp();

        /* online softmax over the warp's 16 rows; each lane owns key columns lane and lane+32 */
        for (int rr = 0; rr < 16; ++rr) {
            const int r = warp * 16 + rr, i = q0 + r;
            const float *srow = sS + r * SLD;
            float s0 = srow[lane] * scale_log2, s1 = srow[lane + 32] * scale_log2;
            const int j0 = k0 + lane, j1 = k0 + lane + 32;
            const bool v0 = i < n && j0 <= i && i <= sEnd[lane];
            const bool v1 = i < n && j1 <= i && i <= sEnd[lane + 32];
            s0 = v0 ? s0 : -INFINITY;
            s1 = v1 ? s1 : -INFINITY;
            const float mx = warp_max(fmaxf(s0, s1));
            const float m_old = sM[r];
            const float m_new = fmaxf(m_old, mx);
            float p0 = 0.f, p1 = 0.f, alpha = 1.f;
            if (m_new != -INFINITY) {
                p0 = exp2f(s0 - m_new);
                p1 = exp2f(s1 - m_new);
                alpha = exp2f(m_old - m_new);
            }
            const bf16 b0 = __float2bfloat16(p0), b1 = __float2bfloat16(p1);
            __syncwarp(); /* P overwrites this row of S: every lane has read its scores */
            sP[r * PLD + lane] = b0;
            sP[r * PLD + lane + 32] = b1;
            const float sum = warp_sum(__bfloat162float(b0) + __bfloat162float(b1));
            __syncwarp();
            if (lane == 0) {
                sM[r] = m_new;
                sL[r] = sL[r] * alpha + sum;
            }
            for (int c = lane; c < D; c += 32) sO[r * Ld<D>::o + c] *= alpha;
        }
        __syncwarp();

        /* O[16w.., :] += P[16w.., :] · V */
        frag_a_row a[ATT_B / 16];
#pragma unroll
        for (int kk = 0; kk < ATT_B / 16; ++kk) wmma::load_matrix_sync(a[kk], sP + (warp * 16) * PLD + kk * 16, PLD);
#pragma unroll
        for (int j = 0; j < D / 16; ++j) {
            frag_acc acc;
            wmma::load_matrix_sync(acc, sO + (warp * 16) * Ld<D>::o + j * 16, Ld<D>::o, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < ATT_B / 16; ++kk) {
                frag_b_row b;
                wmma::load_matrix_sync(b, sV + (kk * 16) * Ld<D>::k + j * 16, Ld<D>::k);
                wmma::mma_sync(acc, a[kk], b, acc);
            }
            wmma::store_matrix_sync(sO + (warp * 16) * Ld<D>::o + j * 16, acc, Ld<D>::o, wmma::mem_row_major);
        }
        __syncwarp();
    }
    __syncthreads();

    const int out_stride = nh * D;
    for (int rr = 0; rr < 16; ++rr) {
        const int r = warp * 16 + rr, i = q0 + r;
        if (i >= n) break;
        const float inv = 1.f / sL[r];
        for (int c = lane; c < D; c += 32)
            out[(size_t)i * out_stride + h * D + c] = __float2bfloat16(sO[r * Ld<D>::o + c] * inv);
        if (lane == 0) lse[(size_t)h * n + i] = sM[r] + log2f(sL[r]);
    }
}

template <int D>
static t2_status attention_fwd_d(void *out, float *lse, const void *q, const void *k, const void *v, int qs, int ks,
                                 int vs, const int32_t *subtree_end, const int32_t *blockmax, int n, int nh,
                                 int nkv) {
    const size_t bytes = FwdSmem<D>::bytes;
    T2_CUDA(cudaFuncSetAttribute(attention_fwd_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    dim3 grid(ceil_div(n, ATT_B), nh);
    const float scale_log2 = (float)(1.4426950408889634 / sqrt((double)D));
    attention_fwd_kernel<D><<<grid, ATT_THREADS, bytes, t2_stream>>>((bf16 *)out, lse, (const bf16 *)q, (const bf16 *)k,
                                                          (const bf16 *)v, qs, ks, vs, subtree_end, blockmax, n,
                                                          nh, nh / nkv, scale_log2);
    T2_LAUNCHED("attention_fwd_kernel");
    return t2_ok();
}

static int strides_ok(int d, int a, int b, int c) { return d % 8 == 0 && a % 8 == 0 && b % 8 == 0 && c % 8 == 0; }

extern "C" t2_status t2_attention_fwd(void *out, float *lse, const void *q, const void *k, const void *v, int q_stride,
                                      int k_stride, int v_stride, const int32_t *subtree_end,
                                      const int32_t *blockmax, int n, int nh, int nkv, int d, int impl) {
    T2_REQUIRE(n > 0 && nh > 0 && nkv > 0 && nh % nkv == 0, "t2_attention_fwd(shape)");
    T2_REQUIRE(strides_ok(d, q_stride, k_stride, v_stride), "t2_attention_fwd(strides multiple of 8)");
    T2_REQUIRE(impl == T2_ATT_FA2 || impl == T2_ATT_FA2_DET || impl == T2_ATT_WMMA || impl == T2_ATT_HOPPER,
               "t2_attention_fwd(impl)");
    if (impl == T2_ATT_HOPPER)
        return t2_attention_fwd_sm90(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh,
                                     nkv, d);
    if (impl != T2_ATT_WMMA) /* both FA2 variants share the forward kernel */
        return t2_attention_fwd_fa2(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh,
                                    nkv, d);
    switch (d) {
    case 64: return attention_fwd_d<64>(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    case 128: return attention_fwd_d<128>(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    }
    return t2_fail(-1, "t2_attention_fwd(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
}

/* ------------------------------------------------------------------------------------------------ */
/* backward */

/* Di[h, i] = Σ_c dout[i, h·D + c] · out[i, h·D + c]; one warp per (i, h) */
__global__ void attention_bwd_dot_kernel(float *Di, const bf16 *dout, const bf16 *out, int n, int nh, int d) {
    const long wid = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (wid >= (long)n * nh) return;
    const int i = (int)(wid / nh), h = (int)(wid - (long)i * nh);
    const bf16 *a = dout + (size_t)i * nh * d + h * d, *b = out + (size_t)i * nh * d + h * d;
    float s = 0.f;
    for (int c = lane; c < d; c += 32) s += __bfloat162float(a[c]) * __bfloat162float(b[c]);
    s = warp_sum(s);
    if (lane == 0) Di[(size_t)h * n + i] = s;
}

template <int D>
struct BwdSmem {
    static constexpr size_t a = 0;                        /* bf16 64×D: K (dq kernel) / Q (dkdv kernel) */
    static constexpr size_t b = a + ATT_B * Ld<D>::k * 2; /* bf16 64×D: V / dO; a+b double as fp32 64×D staging */
    static constexpr size_t c = b + ATT_B * Ld<D>::k * 2; /* bf16 64×D: Q / K */
    static constexpr size_t e = c + ATT_B * Ld<D>::k * 2; /* bf16 64×D: dO / V */
    static constexpr size_t s = e + ATT_B * Ld<D>::k * 2; /* fp32 64×64 scores */
    static constexpr size_t dp = s + ATT_B * SLD * 4;     /* fp32 64×64 dP, then bf16 dS in place */
    static constexpr size_t pb = s;                       /* bf16 64×64 P over the rows of S */
    static constexpr size_t dsb = dp;                     /* bf16 64×64 dS (scaled) over the rows of dP */
    static constexpr size_t lse = dp + ATT_B * SLD * 4;
    static constexpr size_t di = lse + ATT_B * 4;
    static constexpr size_t end = di + ATT_B * 4;
    static constexpr size_t bytes = end + ATT_B * 4;
};

/* For the tile held in sS (scores, query rows × key cols) and sdP: P = exp2(s·scale_log2 − lse2),
 * dS = P·(dP − Di)·scale, for the calling warp's 16 query rows. Rows/cols outside the mask get 0.
 * P and dS are written in place over the rows of S and dP: every lane reads its row values before
 * the __syncwarp, and writes after it. */
__device__ __forceinline__ void tile_p_ds(bf16 *sPb, bf16 *sdSb, const float *sS, const float *sdP,
                                          const float *sLse, const float *sDi, const int *sEnd, int q0, int k0,
                                          int n, int warp, int lane, float scale_log2, float scale) {
    for (int rr = 0; rr < 16; ++rr) {
        const int r = warp * 16 + rr, i = q0 + r;
        const float lse2 = sLse[r], di = sDi[r];
        float p[2], ds[2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int cc = lane + half * 32, j = k0 + cc;
            const bool vis = i < n && j <= i && i <= sEnd[cc];
            p[half] = vis ? exp2f(sS[r * SLD + cc] * scale_log2 - lse2) : 0.f;
            ds[half] = p[half] * (sdP[r * SLD + cc] - di) * scale;
        }
        __syncwarp();
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int cc = lane + half * 32;
            if (sPb) sPb[r * PLD + cc] = __float2bfloat16(p[half]);
            sdSb[r * PLD + cc] = __float2bfloat16(ds[half]);
        }
        __syncwarp();
    }
}

/* store the warp's D/16 accumulator fragments (16 rows) through fp32 staging to bf16 rows of dst */
template <int D>
__device__ __forceinline__ void store_rows(bf16 *dst, int stride, int row0, int n, float *stage, frag_acc *acc,
                                           int warp, int lane) {
#pragma unroll
    for (int j = 0; j < D / 16; ++j)
        wmma::store_matrix_sync(stage + (warp * 16) * Ld<D>::o + j * 16, acc[j], Ld<D>::o, wmma::mem_row_major);
    __syncwarp();
    for (int rr = 0; rr < 16; ++rr) {
        const int r = warp * 16 + rr, i = row0 + r;
        if (i >= n) break;
        for (int c = lane; c < D; c += 32) dst[(size_t)i * stride + c] = __float2bfloat16(stage[r * Ld<D>::o + c]);
    }
}

template <int D>
__global__ void __launch_bounds__(ATT_THREADS) attention_bwd_dq_kernel(
    bf16 *dq, const bf16 *dout, const float *lse, const float *Di, const bf16 *q, const bf16 *k, const bf16 *v,
    int qs, int ks, int vs, const int32_t *subtree_end, const int32_t *blockmax, int n, int nh, int group,
    float scale_log2, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    typedef BwdSmem<D> L;
    bf16 *sK = (bf16 *)(smem + L::a), *sV = (bf16 *)(smem + L::b), *sQ = (bf16 *)(smem + L::c),
         *sdO = (bf16 *)(smem + L::e);
    float *sS = (float *)(smem + L::s), *sdP = (float *)(smem + L::dp);
    bf16 *sdSb = (bf16 *)(smem + L::dsb);
    float *sLse = (float *)(smem + L::lse), *sDi = (float *)(smem + L::di);
    int *sEnd = (int *)(smem + L::end);

    const int qb = blockIdx.x, h = blockIdx.y, g = h / group;
    const int q0 = qb * ATT_B;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    load_tile<D>(sQ, q + h * D, qs, q0, n);
    load_tile<D>(sdO, dout + h * D, nh * D, q0, n);
    for (int r = threadIdx.x; r < ATT_B; r += ATT_THREADS) {
        const int i = q0 + r;
        sLse[r] = i < n ? lse[(size_t)h * n + i] : INFINITY;
        sDi[r] = i < n ? Di[(size_t)h * n + i] : 0.f;
    }
    frag_acc acc[D / 16];
#pragma unroll
    for (int j = 0; j < D / 16; ++j) wmma::fill_fragment(acc[j], 0.f);

    for (int kb = 0; kb <= qb; ++kb) {
        if (blockmax[kb] < q0) continue;
        const int k0 = kb * ATT_B;
        __syncthreads();
        load_tile<D>(sK, k + g * D, ks, k0, n);
        load_tile<D>(sV, v + g * D, vs, k0, n);
        for (int i = threadIdx.x; i < ATT_B; i += ATT_THREADS) sEnd[i] = k0 + i < n ? subtree_end[k0 + i] : -1;
        __syncthreads();
        warp_abt<D>(sS, sQ, sK, warp);
        warp_abt<D>(sdP, sdO, sV, warp);
        __syncwarp();
        tile_p_ds(nullptr, sdSb, sS, sdP, sLse, sDi, sEnd, q0, k0, n, warp, lane, scale_log2, scale);
        __syncwarp();
        /* dQ[16w.., :] += dS[16w.., :] · K */
#pragma unroll
        for (int kk = 0; kk < ATT_B / 16; ++kk) {
            frag_a_row a;
            wmma::load_matrix_sync(a, sdSb + (warp * 16) * PLD + kk * 16, PLD);
#pragma unroll
            for (int j = 0; j < D / 16; ++j) {
                frag_b_row b;
                wmma::load_matrix_sync(b, sK + (kk * 16) * Ld<D>::k + j * 16, Ld<D>::k);
                wmma::mma_sync(acc[j], a, b, acc[j]);
            }
        }
    }
    __syncthreads(); /* sK/sV are reused as fp32 staging */
    store_rows<D>(dq + h * D, nh * D, q0, n, (float *)(smem + L::a), acc, warp, lane);
}

template <int D>
__global__ void __launch_bounds__(ATT_THREADS) attention_bwd_dkdv_kernel(
    bf16 *dk, int dks, bf16 *dv, int dvs, const bf16 *dout, const float *lse, const float *Di, const bf16 *q,
    const bf16 *k, const bf16 *v, int qs, int ks, int vs, const int32_t *subtree_end, const int32_t *blockmax,
    int n, int nh, int group, float scale_log2, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    typedef BwdSmem<D> L;
    bf16 *sQ = (bf16 *)(smem + L::a), *sdO = (bf16 *)(smem + L::b), *sK = (bf16 *)(smem + L::c),
         *sV = (bf16 *)(smem + L::e);
    float *sS = (float *)(smem + L::s), *sdP = (float *)(smem + L::dp);
    bf16 *sPb = (bf16 *)(smem + L::pb), *sdSb = (bf16 *)(smem + L::dsb);
    float *sLse = (float *)(smem + L::lse), *sDi = (float *)(smem + L::di);
    int *sEnd = (int *)(smem + L::end);

    const int kb = blockIdx.x, g = blockIdx.y;
    const int k0 = kb * ATT_B;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int last = min(blockmax[kb], n - 1); /* the last query any key of this block is visible to */

    load_tile<D>(sK, k + g * D, ks, k0, n);
    load_tile<D>(sV, v + g * D, vs, k0, n);
    for (int i = threadIdx.x; i < ATT_B; i += ATT_THREADS) sEnd[i] = k0 + i < n ? subtree_end[k0 + i] : -1;

    frag_acc dK[D / 16], dV[D / 16];
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
        wmma::fill_fragment(dK[j], 0.f);
        wmma::fill_fragment(dV[j], 0.f);
    }

    for (int hh = 0; hh < group; ++hh) {
        const int h = g * group + hh;
        for (int qb = kb; qb * ATT_B <= last; ++qb) {
            const int q0 = qb * ATT_B;
            __syncthreads();
            load_tile<D>(sQ, q + h * D, qs, q0, n);
            load_tile<D>(sdO, dout + h * D, nh * D, q0, n);
            for (int r = threadIdx.x; r < ATT_B; r += ATT_THREADS) {
                const int i = q0 + r;
                sLse[r] = i < n ? lse[(size_t)h * n + i] : INFINITY;
                sDi[r] = i < n ? Di[(size_t)h * n + i] : 0.f;
            }
            __syncthreads();
            warp_abt<D>(sS, sQ, sK, warp);   /* rows: queries 16w.. */
            warp_abt<D>(sdP, sdO, sV, warp);
            __syncwarp();
            tile_p_ds(sPb, sdSb, sS, sdP, sLse, sDi, sEnd, q0, k0, n, warp, lane, scale_log2, scale);
            __syncthreads(); /* the dK/dV products read every query row of P and dS */
            /* dV[16w.., :] += Pᵀ[16w.., :] · dO ;  dK[16w.., :] += dSᵀ[16w.., :] · Q */
#pragma unroll
            for (int kk = 0; kk < ATT_B / 16; ++kk) {
                frag_a_col pt, dst;
                wmma::load_matrix_sync(pt, sPb + (kk * 16) * PLD + warp * 16, PLD);
                wmma::load_matrix_sync(dst, sdSb + (kk * 16) * PLD + warp * 16, PLD);
#pragma unroll
                for (int j = 0; j < D / 16; ++j) {
                    frag_b_row b;
                    wmma::load_matrix_sync(b, sdO + (kk * 16) * Ld<D>::k + j * 16, Ld<D>::k);
                    wmma::mma_sync(dV[j], pt, b, dV[j]);
                    wmma::load_matrix_sync(b, sQ + (kk * 16) * Ld<D>::k + j * 16, Ld<D>::k);
                    wmma::mma_sync(dK[j], dst, b, dK[j]);
                }
            }
        }
    }
    __syncthreads(); /* sQ/sdO are reused as fp32 staging */
    float *stage = (float *)(smem + L::a);
    store_rows<D>(dv + g * D, dvs, k0, n, stage, dV, warp, lane);
    __syncwarp();
    store_rows<D>(dk + g * D, dks, k0, n, stage, dK, warp, lane);
}

template <int D>
static t2_status attention_bwd_d(void *dq, void *dk, int dks, void *dv, int dvs, float *Di, const void *dout,
                                 const float *lse, const void *q, const void *k, const void *v, int qs, int ks,
                                 int vs, const int32_t *subtree_end, const int32_t *blockmax, int n, int nh,
                                 int nkv) {
    const size_t bytes = BwdSmem<D>::bytes;
    const float scale = (float)(1.0 / sqrt((double)D));
    const float scale_log2 = (float)(1.4426950408889634 / sqrt((double)D));
    T2_CUDA(cudaFuncSetAttribute(attention_bwd_dq_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    T2_CUDA(cudaFuncSetAttribute(attention_bwd_dkdv_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    dim3 gq(ceil_div(n, ATT_B), nh);
    attention_bwd_dq_kernel<D><<<gq, ATT_THREADS, bytes, t2_stream>>>((bf16 *)dq, (const bf16 *)dout, lse, Di, (const bf16 *)q,
                                                            (const bf16 *)k, (const bf16 *)v, qs, ks, vs, subtree_end,
                                                            blockmax, n, nh, nh / nkv, scale_log2, scale);
    T2_LAUNCHED("attention_bwd_dq_kernel");
    dim3 gk(ceil_div(n, ATT_B), nkv);
    attention_bwd_dkdv_kernel<D><<<gk, ATT_THREADS, bytes, t2_stream>>>((bf16 *)dk, dks, (bf16 *)dv, dvs, (const bf16 *)dout,
                                                              lse, Di, (const bf16 *)q, (const bf16 *)k,
                                                              (const bf16 *)v, qs, ks, vs, subtree_end, blockmax, n,
                                                              nh, nh / nkv, scale_log2, scale);
    T2_LAUNCHED("attention_bwd_dkdv_kernel");
    return t2_ok();
}

extern "C" t2_status t2_attention_bwd(float *dq, void *dk, int dk_stride, void *dv, int dv_stride, float *scratch_d,
                                      void *scratch_bf16, const void *dout, const void *out, const float *lse,
                                      const void *q, const void *k, const void *v, int q_stride, int k_stride,
                                      int v_stride, const int32_t *subtree_end, const int32_t *blockmax, int n,
                                      int nh, int nkv, int d, int impl) {
    T2_REQUIRE(n > 0 && nh > 0 && nkv > 0 && nh % nkv == 0, "t2_attention_bwd(shape)");
    T2_REQUIRE(strides_ok(d, q_stride, k_stride, v_stride), "t2_attention_bwd(strides multiple of 8)");
    T2_REQUIRE(impl == T2_ATT_FA2 || impl == T2_ATT_FA2_DET || impl == T2_ATT_WMMA || impl == T2_ATT_HOPPER,
               "t2_attention_bwd(impl)");
    T2_REQUIRE(impl != T2_ATT_WMMA || scratch_bf16 != NULL, "t2_attention_bwd(scratch_bf16 required by T2_ATT_WMMA)");
    T2_REQUIRE(d == 64 || d == 128, "t2_attention_bwd(head_dim 64 or 128)");
    long warps = (long)n * nh;
    attention_bwd_dot_kernel<<<(int)((warps * 32 + 255) / 256), 256, 0, t2_stream>>>(scratch_d, (const bf16 *)dout,
                                                                         (const bf16 *)out, n, nh, d);
    T2_LAUNCHED("attention_bwd_dot_kernel");
    if (impl == T2_ATT_HOPPER)
        return t2_attention_bwd_sm90(dq, dk, dk_stride, dv, dv_stride, scratch_d, dout, lse, q, k, v, q_stride,
                                     k_stride, v_stride, subtree_end, blockmax, n, nh, nkv, d);
    if (impl == T2_ATT_FA2 || impl == T2_ATT_FA2_DET)
        return t2_attention_bwd_fa2(dq, impl == T2_ATT_FA2, dk, dk_stride, dv, dv_stride, scratch_d, dout, lse, q, k,
                                    v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv, d);
    t2_status st;
    switch (d) { /* the WMMA kernels write bf16 dq, widened to fp32 afterwards */
    case 64:
        st = attention_bwd_d<64>(scratch_bf16, dk, dk_stride, dv, dv_stride, scratch_d, dout, lse, q, k, v, q_stride,
                                 k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
        break;
    case 128:
        st = attention_bwd_d<128>(scratch_bf16, dk, dk_stride, dv, dv_stride, scratch_d, dout, lse, q, k, v,
                                  q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
        break;
    default:
        return t2_fail(-1, "t2_attention_bwd(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
    }
    if (st.code != 0) return st;
    return t2_bf16_to_f32(dq, scratch_bf16, (size_t)n * nh * d);
}
