/*
 * attention_fa2.cu: FlashAttention-2-style tree attention (the default kernels off Hopper;
 * attention.cu keeps the earlier WMMA kernels, selectable with T2_ATT_WMMA, and dispatches here for
 * T2_ATT_FA2).
 *
 * Same mask, same outputs and the same base-2 lse as attention.cu: key j is visible to query i iff
 * j ≤ i ≤ subtree_end[j]. What differs is where the data lives:
 *   - matrix products are mma.sync.m16n8k16 (bf16 operands, fp32 accumulators) whose operands come
 *     from shared memory through ldmatrix (.trans where the tile is stored the other way round);
 *   - score tiles S/P, dP/dS and the O, dQ, dK, dV accumulators never leave registers: the C
 *     fragment of S (16×8 fp32 per n-tile) is repacked in registers into the A fragment of P·V;
 *     the online-softmax max/sum and their rescaling are per-row registers, reduced across the 4
 *     lanes that share a row with two shuffles;
 *   - K/V (forward, dQ) and Q/dO (dK/dV) tiles are double-buffered with cp.async, so the next
 *     tile's loads overlap the current tile's math; one __syncthreads per tile;
 *   - shared-memory rows are padded by 16 bytes, so the 8 row addresses of one ldmatrix fall in
 *     different banks.
 * Tile skipping uses the per-64-key block maxima and minima of subtree_end (t2_tree_blockmax): a key
 * tile no query of a warp's rows can see is skipped by that warp (by the whole block when no warp
 * needs it), and a tile every query of the warp sees entirely (keys all before the rows, rows all
 * inside every key's subtree) needs no per-element mask.
 *
 * Kernels: forward (4 warps × 32 query rows, 64-key tiles) and dK/dV (8 warps × 16 key rows,
 * 64-query tiles, looping over the query heads of the GQA group). dQ comes one of two ways:
 *   - atomic (T2_ATT_FA2, FlashAttention-2's own scheme): the dK/dV kernel also writes
 *     each tile's dSᵀ to shared memory and multiplies it by its K block, adding the 64×d partial dQ
 *     into the fp32 dq with atomics; 5 tile products per (query tile, key block) instead of 7, at
 *     the price of a summation order that varies from run to run;
 *   - deterministic (T2_ATT_FA2_DET): a separate dQ kernel (4 warps × 16 query rows, 64-key tiles)
 *     recomputes S and dP per query tile, so every run gives the same bits.
 * defines: t2_attention_fwd_fa2, t2_attention_bwd_fa2 (declared in attention_impl.h)
 */
#include "common.cuh"
#include "attention_impl.h"
#include "vec.cuh"
#include "tile.cuh"
#include <math.h>
#include <stdint.h>

namespace {

constexpr int BN = 64; /* keys per tile (forward, dQ); queries per tile (dK/dV); = T2's blockmax granularity */

template <int D> struct Ld {
    static constexpr int v = D + 8; /* padded bf16 row: consecutive rows start 16 bytes apart in the banks */
};

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

/* c += a·b for one m16n8k16 tile (a: 4 regs of bf16 pairs, b: 2 regs, c: 4 fp32) */
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The A fragment of a 16×16 k-chunk from the C fragments of the two 16×8 n-tiles that make it up. */
__device__ __forceinline__ void c_to_a(uint32_t a[4], const float c0[4], const float c1[4]) {
    a[0] = pack2(c0[0], c0[1]);
    a[1] = pack2(c0[2], c0[3]);
    a[2] = pack2(c1[0], c1[1]);
    a[3] = pack2(c1[2], c1[3]);
}

/* ldmatrix address of this lane for the A fragment (16 rows × 16 cols at row0, col0) of a row-major tile */
template <int D>
__device__ __forceinline__ const bf16 *a_addr(const bf16 *tile, int row0, int col0, int lane) {
    return tile + (row0 + (lane & 15)) * Ld<D>::v + col0 + (lane >> 4) * 8;
}
/* B fragments of two n-tiles (rows n0..n0+15 of a tile stored [n][k]) for k-chunk col0: regs 0,1 are
 * the n-tile n0, regs 2,3 the n-tile n0+8 (non-transposed ldmatrix) */
template <int D>
__device__ __forceinline__ const bf16 *bn_addr(const bf16 *tile, int n0, int col0, int lane) {
    return tile + (n0 + (lane & 7) + ((lane >> 4) << 3)) * Ld<D>::v + col0 + ((lane >> 3) & 1) * 8;
}
/* B fragments of two n-tiles (cols n0..n0+15) for k-chunk rows k0..k0+15 of a tile stored [k][n]
 * (transposed ldmatrix): regs 0,1 are the n-tile n0, regs 2,3 the n-tile n0+8 */
template <int D>
__device__ __forceinline__ const bf16 *bt_addr(const bf16 *tile, int k0, int n0, int lane) {
    return tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * Ld<D>::v + n0 + (lane >> 4) * 8;
}

/* rows × D bf16 rows from src (row stride in elements) into a padded shared tile; rows ≥ n zero */
template <int D, int ROWS, int NT>
__device__ __forceinline__ void load_rows(bf16 *dst, const bf16 *src, int stride, int row0, int n) {
    constexpr int VPR = D / 8;
#pragma unroll
    for (int idx = threadIdx.x; idx < ROWS * VPR; idx += NT) {
        const int r = idx / VPR, c = idx - r * VPR, row = row0 + r;
        const bool ok = row < n;
        cp_async16(dst + r * Ld<D>::v + c * 8, src + (size_t)(ok ? row : 0) * stride + c * 8, ok);
    }
}

/* The two warp-level tile products of the backward kernels, one 16-row m-tile each:
 *   mma_rows_bt: c[BN/8] = A[row0, row0+16) · Bᵀ over d (A and B are D-wide shared tiles; B has
 *                BN rows), e.g. Sᵀ = K·Qᵀ; c must be zeroed by the caller;
 *   mma_c_b:     acc[D/8] += C · B, where C (16 × BN) is the C fragments c[BN/8] of an earlier
 *                product, repacked as A operands, and B a [BN][D] shared tile, e.g. dV += Pᵀ·dO. */
template <int D>
__device__ __forceinline__ void mma_rows_bt(float c[BN / 8][4], const bf16 *A, int row0, const bf16 *B, int lane) {
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
        uint32_t a[4];
        ldsm_x4(a, a_addr<D>(A, row0, kc * 16, lane));
#pragma unroll
        for (int np = 0; np < BN / 16; ++np) {
            uint32_t b[4];
            ldsm_x4(b, bn_addr<D>(B, np * 16, kc * 16, lane));
            mma(c[2 * np], a, b[0], b[1]);
            mma(c[2 * np + 1], a, b[2], b[3]);
        }
    }
}

template <int D>
__device__ __forceinline__ void mma_c_b(float acc[D / 8][4], float c[BN / 8][4], const bf16 *B, int lane) {
#pragma unroll
    for (int kc = 0; kc < BN / 16; ++kc) {
        uint32_t a[4];
        c_to_a(a, c[2 * kc], c[2 * kc + 1]);
#pragma unroll
        for (int dpair = 0; dpair < D / 16; ++dpair) {
            uint32_t b[4];
            ldsm_x4_t(b, bt_addr<D>(B, kc * 16, dpair * 16, lane));
            mma(acc[2 * dpair], a, b[0], b[1]);
            mma(acc[2 * dpair + 1], a, b[2], b[3]);
        }
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* forward: block = MT·16·NW query rows of head h; warp w owns rows [16·MT·w, 16·MT·(w+1)) */

template <int D, int MT, int NW> struct FwdSmem {
    static constexpr int BR = 16 * MT * NW;
    static constexpr size_t q = 0;
    static constexpr size_t k = q + (size_t)BR * Ld<D>::v * 2;
    static constexpr size_t v = k + 2ull * BN * Ld<D>::v * 2;
    static constexpr size_t end = v + 2ull * BN * Ld<D>::v * 2;
    static constexpr size_t bytes = end + 2ull * BN * 4;
};

template <int D, int MT, int NW>
__global__ void __launch_bounds__(NW * 32, 2) fa2_fwd_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k,
                                                             const bf16 *v, int qs, int ks, int vs,
                                                             const int32_t *send, const int32_t *bmax,
                                                             const int32_t *bmin, int n, int nh, int group,
                                                             float sl2) {
    typedef FwdSmem<D, MT, NW> L;
    constexpr int BR = L::BR, NT = NW * 32, LD = Ld<D>::v;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *sQ = (bf16 *)(smem + L::q), *sK = (bf16 *)(smem + L::k), *sV = (bf16 *)(smem + L::v);
    int *sEnd = (int *)(smem + L::end);

    const int qb = gridDim.x - 1 - blockIdx.x; /* the longest rows (most keys) start first */
    const int h = blockIdx.y, g = h / group;
    const int q0 = qb * BR;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wr = warp * 16 * MT;           /* warp's first row within the tile */
    const int r0 = q0 + wr, r1 = r0 + 16 * MT - 1;
    const bf16 *kg = k + g * D, *vg = v + g * D;
    const int kend = min(q0 + BR - 1, n - 1) / BN;

    load_rows<D, BR, NT>(sQ, q + h * D, qs, q0, n);
    auto next_tile = [&](int kb) {
        while (kb <= kend && bmax[kb] < q0) ++kb;
        return kb;
    };
    auto load_kv = [&](int kb, int st) {
        load_rows<D, BN, NT>(sK + st * BN * LD, kg, ks, kb * BN, n);
        load_rows<D, BN, NT>(sV + st * BN * LD, vg, vs, kb * BN, n);
        for (int i = threadIdx.x; i < BN; i += NT) sEnd[st * BN + i] = kb * BN + i < n ? send[kb * BN + i] : -1;
    };
    int kb = next_tile(0);
    if (kb <= kend) load_kv(kb, 0);
    cp_commit();

    float o[MT][D / 8][4];
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int t = 0; t < D / 8; ++t) o[mt][t][0] = o[mt][t][1] = o[mt][t][2] = o[mt][t][3] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }

    int st = 0;
    while (kb <= kend) {
        const int nkb = next_tile(kb + 1);
        cp_wait_all();
        __syncthreads(); /* tile kb landed for everyone; everyone is done with the other stage */
        if (nkb <= kend) load_kv(nkb, st ^ 1);
        cp_commit();

        const int k0 = kb * BN;
        if (bmax[kb] >= r0 && k0 <= r1) { /* some key of the tile is visible to some row of the warp */
            const bool full = k0 + BN - 1 <= r0 && r1 <= bmin[kb] && r1 < n;
            const bf16 *cK = sK + st * BN * LD, *cV = sV + st * BN * LD;
            const int *cEnd = sEnd + st * BN;
            float s[MT][BN / 8][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int t = 0; t < BN / 8; ++t) s[mt][t][0] = s[mt][t][1] = s[mt][t][2] = s[mt][t][3] = 0.f;
#pragma unroll
            for (int kc = 0; kc < D / 16; ++kc) {
                uint32_t a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) ldsm_x4(a[mt], a_addr<D>(sQ, wr + mt * 16, kc * 16, lane));
#pragma unroll
                for (int np = 0; np < BN / 16; ++np) {
                    uint32_t b[4];
                    ldsm_x4(b, bn_addr<D>(cK, np * 16, kc * 16, lane));
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma(s[mt][2 * np], a[mt], b[0], b[1]);
                        mma(s[mt][2 * np + 1], a[mt], b[2], b[3]);
                    }
                }
            }
            /* online softmax in the base-2 domain; this lane holds rows lane/4 and lane/4+8 of each m-tile */
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int i = r0 + mt * 16 + (lane >> 2) + hf * 8;
                    float mx = -INFINITY;
#pragma unroll
                    for (int t = 0; t < BN / 8; ++t) {
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            float x = s[mt][t][hf * 2 + e] * sl2;
                            if (!full) {
                                const int jj = t * 8 + (lane & 3) * 2 + e;
                                x = (k0 + jj <= i && i <= cEnd[jj]) ? x : -INFINITY;
                            }
                            s[mt][t][hf * 2 + e] = x;
                            mx = fmaxf(mx, x);
                        }
                    }
                    mx = shfl_max4(mx);
                    const float mnew = fmaxf(m[mt][hf], mx);
                    const float mref = mnew == -INFINITY ? 0.f : mnew; /* a row with nothing visible yet */
                    const float alpha = exp2f(m[mt][hf] - mref);
                    m[mt][hf] = mnew;
                    float sum = 0.f;
#pragma unroll
                    for (int t = 0; t < BN / 8; ++t) {
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const float p = exp2f(s[mt][t][hf * 2 + e] - mref);
                            s[mt][t][hf * 2 + e] = p;
                            sum += p;
                        }
                    }
                    l[mt][hf] = l[mt][hf] * alpha + sum;
#pragma unroll
                    for (int t = 0; t < D / 8; ++t) {
                        o[mt][t][hf * 2] *= alpha;
                        o[mt][t][hf * 2 + 1] *= alpha;
                    }
                }
            }
            /* O += P · V */
#pragma unroll
            for (int kc = 0; kc < BN / 16; ++kc) {
                uint32_t a[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) c_to_a(a[mt], s[mt][2 * kc], s[mt][2 * kc + 1]);
#pragma unroll
                for (int dp = 0; dp < D / 16; ++dp) {
                    uint32_t b[4];
                    ldsm_x4_t(b, bt_addr<D>(cV, kc * 16, dp * 16, lane));
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma(o[mt][2 * dp], a[mt], b[0], b[1]);
                        mma(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
                    }
                }
            }
        }
        kb = nkb;
        st ^= 1;
    }

    const size_t os = (size_t)nh * D;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            const float sum = shfl_sum4(l[mt][hf]);
            const int i = r0 + mt * 16 + (lane >> 2) + hf * 8;
            if (i < n) {
                const float inv = sum > 0.f ? 1.f / sum : 0.f;
                bf16 *orow = out + (size_t)i * os + h * D + (lane & 3) * 2;
#pragma unroll
                for (int t = 0; t < D / 8; ++t)
                    *reinterpret_cast<uint32_t *>(orow + t * 8) =
                        pack2(o[mt][t][hf * 2] * inv, o[mt][t][hf * 2 + 1] * inv);
                if ((lane & 3) == 0) lse[(size_t)h * n + i] = m[mt][hf] + log2f(sum);
            }
        }
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* dQ: block = 16·NW query rows of head h, loops over the visible 64-key tiles like the forward pass;
 * S = Q·Kᵀ and dP = dO·Vᵀ in registers, dS = P∘(dP − Di)·scale, dQ += dS·K. */

template <int D, int NW> struct DqSmem {
    static constexpr int BR = 16 * NW;
    static constexpr size_t q = 0;
    static constexpr size_t dout = q + (size_t)BR * Ld<D>::v * 2;
    static constexpr size_t k = dout + (size_t)BR * Ld<D>::v * 2;
    static constexpr size_t v = k + 2ull * BN * Ld<D>::v * 2;
    static constexpr size_t end = v + 2ull * BN * Ld<D>::v * 2;
    static constexpr size_t lse = end + 2ull * BN * 4;
    static constexpr size_t di = lse + (size_t)BR * 4;
    static constexpr size_t bytes = di + (size_t)BR * 4;
};

template <int D, int NW>
__global__ void __launch_bounds__(NW * 32, 2) fa2_bwd_dq_kernel(float *dq, const bf16 *dout, const float *lse,
                                                                const float *Di, const bf16 *q, const bf16 *k,
                                                                const bf16 *v, int qs, int ks, int vs,
                                                                const int32_t *send, const int32_t *bmax,
                                                                const int32_t *bmin, int n, int nh, int group,
                                                                float sl2, float scale) {
    typedef DqSmem<D, NW> L;
    constexpr int BR = L::BR, NT = NW * 32, LD = Ld<D>::v;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *sQ = (bf16 *)(smem + L::q), *sdO = (bf16 *)(smem + L::dout), *sK = (bf16 *)(smem + L::k),
         *sV = (bf16 *)(smem + L::v);
    int *sEnd = (int *)(smem + L::end);
    float *sLse = (float *)(smem + L::lse), *sDi = (float *)(smem + L::di);

    const int qb = gridDim.x - 1 - blockIdx.x;
    const int h = blockIdx.y, g = h / group;
    const int q0 = qb * BR;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wr = warp * 16;
    const int r0 = q0 + wr, r1 = r0 + 15;
    const bf16 *kg = k + g * D, *vg = v + g * D;
    const int kend = min(q0 + BR - 1, n - 1) / BN;

    load_rows<D, BR, NT>(sQ, q + h * D, qs, q0, n);
    load_rows<D, BR, NT>(sdO, dout + h * D, nh * D, q0, n);
    for (int r = threadIdx.x; r < BR; r += NT) {
        const int i = q0 + r;
        sLse[r] = i < n ? lse[(size_t)h * n + i] : INFINITY;
        sDi[r] = i < n ? Di[(size_t)h * n + i] : 0.f;
    }
    auto next_tile = [&](int kb) {
        while (kb <= kend && bmax[kb] < q0) ++kb;
        return kb;
    };
    auto load_kv = [&](int kb, int st) {
        load_rows<D, BN, NT>(sK + st * BN * LD, kg, ks, kb * BN, n);
        load_rows<D, BN, NT>(sV + st * BN * LD, vg, vs, kb * BN, n);
        for (int i = threadIdx.x; i < BN; i += NT) sEnd[st * BN + i] = kb * BN + i < n ? send[kb * BN + i] : -1;
    };
    int kb = next_tile(0);
    if (kb <= kend) load_kv(kb, 0);
    cp_commit();

    float acc[D / 8][4];
#pragma unroll
    for (int t = 0; t < D / 8; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;

    int st = 0;
    while (kb <= kend) {
        const int nkb = next_tile(kb + 1);
        cp_wait_all();
        __syncthreads();
        if (nkb <= kend) load_kv(nkb, st ^ 1);
        cp_commit();

        const int k0 = kb * BN;
        if (bmax[kb] >= r0 && k0 <= r1) {
            const bool full = k0 + BN - 1 <= r0 && r1 <= bmin[kb] && r1 < n;
            const bf16 *cK = sK + st * BN * LD, *cV = sV + st * BN * LD;
            const int *cEnd = sEnd + st * BN;
            float s[BN / 8][4], dp[BN / 8][4];
#pragma unroll
            for (int t = 0; t < BN / 8; ++t)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[t][e] = dp[t][e] = 0.f;
#pragma unroll
            for (int kc = 0; kc < D / 16; ++kc) {
                uint32_t aq[4], ao[4];
                ldsm_x4(aq, a_addr<D>(sQ, wr, kc * 16, lane));
                ldsm_x4(ao, a_addr<D>(sdO, wr, kc * 16, lane));
#pragma unroll
                for (int np = 0; np < BN / 16; ++np) {
                    uint32_t b[4];
                    ldsm_x4(b, bn_addr<D>(cK, np * 16, kc * 16, lane));
                    mma(s[2 * np], aq, b[0], b[1]);
                    mma(s[2 * np + 1], aq, b[2], b[3]);
                    ldsm_x4(b, bn_addr<D>(cV, np * 16, kc * 16, lane));
                    mma(dp[2 * np], ao, b[0], b[1]);
                    mma(dp[2 * np + 1], ao, b[2], b[3]);
                }
            }
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                const int rl = wr + (lane >> 2) + hf * 8, i = q0 + rl;
                const float lse2 = sLse[rl], di = sDi[rl];
#pragma unroll
                for (int t = 0; t < BN / 8; ++t) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int jj = t * 8 + (lane & 3) * 2 + e;
                        const bool vis = full || (k0 + jj <= i && i <= cEnd[jj]);
                        const float p = vis ? exp2f(s[t][hf * 2 + e] * sl2 - lse2) : 0.f;
                        s[t][hf * 2 + e] = p * (dp[t][hf * 2 + e] - di) * scale;
                    }
                }
            }
            /* dQ += dS · K */
            mma_c_b<D>(acc, s, cK, lane);
        }
        kb = nkb;
        st ^= 1;
    }

    const size_t os = (size_t)nh * D;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int i = r0 + (lane >> 2) + hf * 8;
        if (i >= n) continue;
        float *row = dq + (size_t)i * os + h * D + (lane & 3) * 2;
#pragma unroll
        for (int t = 0; t < D / 8; ++t)
            *reinterpret_cast<float2 *>(row + t * 8) = make_float2(acc[t][hf * 2], acc[t][hf * 2 + 1]);
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* dK/dV: block = 16·NW keys of kv head g; warp w owns keys [16w, 16w+16). For every query head of the
 * group and every 64-query tile some key of the block is visible to: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ in
 * registers (rows = keys), Pᵀ from the saved lse, dV += Pᵀ·dO, dSᵀ = Pᵀ∘(dPᵀ − Di)·scale,
 * dK += dSᵀ·Q; Q, dO, lse and Di tiles are double-buffered. */

template <int D, int NW> struct DkvSmem {
    static constexpr int BK = 16 * NW;
    static constexpr size_t k = 0;
    static constexpr size_t v = k + (size_t)BK * Ld<D>::v * 2;
    static constexpr size_t q = v + (size_t)BK * Ld<D>::v * 2;        /* 2 stages */
    static constexpr size_t dout = q + 2ull * BN * Ld<D>::v * 2;      /* 2 stages */
    static constexpr size_t lse = dout + 2ull * BN * Ld<D>::v * 2;    /* 2 stages */
    static constexpr size_t di = lse + 2ull * BN * 4;                 /* 2 stages */
    static constexpr size_t wmax = di + 2ull * BN * 4;                /* NW ints */
    static constexpr size_t act = wmax + (size_t)NW * 4;              /* NW ints: warp had visible pairs */
    static constexpr size_t ds = act + (size_t)NW * 4;                /* dSᵀ [BK][BN + 8] bf16 (atomic dQ) */
    static constexpr int lds = BN + 8;
    static constexpr size_t bytes_det = act;
    static constexpr size_t bytes_atomic = ds + (size_t)BK * lds * 2;
};

template <int D, int NW, bool ATOMIC_DQ>
__global__ void __launch_bounds__(NW * 32, 1) fa2_bwd_dkdv_kernel(bf16 *dk, int dks, bf16 *dv, int dvs,
                                                                  float *dq, const bf16 *dout,
                                                                  const float *lse, const float *Di, const bf16 *q,
                                                                  const bf16 *k, const bf16 *v, int qs, int ks,
                                                                  int vs, const int32_t *send,
                                                                  const int32_t *bmax, int n, int nh, int group,
                                                                  float sl2, float scale) {
    typedef DkvSmem<D, NW> L;
    constexpr int BK = L::BK, NT = NW * 32, LD = Ld<D>::v;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *sK = (bf16 *)(smem + L::k), *sV = (bf16 *)(smem + L::v), *sQ = (bf16 *)(smem + L::q),
         *sdO = (bf16 *)(smem + L::dout);
    float *sLse = (float *)(smem + L::lse), *sDi = (float *)(smem + L::di);
    int *sWmax = (int *)(smem + L::wmax);
    int *sAct = (int *)(smem + L::act);
    bf16 *sdS = (bf16 *)(smem + L::ds);

    const int g = blockIdx.y;
    const int k0 = blockIdx.x * BK;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wk = warp * 16; /* the warp's first key within the block */

    load_rows<D, BK, NT>(sK, k + g * D, ks, k0, n);
    load_rows<D, BK, NT>(sV, v + g * D, vs, k0, n);

    KeyBlock<NW, BN> kb; /* this block's keys and the query tiles that see them */
    kb.init(sWmax, send, bmax, k0, n, warp, lane);
    auto load_q = [&](int hh, int qt, int st) {
        const int h = g * group + hh, q0 = qt * BN;
        load_rows<D, BN, NT>(sQ + st * BN * LD, q + h * D, qs, q0, n);
        load_rows<D, BN, NT>(sdO + st * BN * LD, dout + h * D, nh * D, q0, n);
        for (int r = threadIdx.x; r < BN; r += NT) {
            const int i = q0 + r;
            sLse[st * BN + r] = i < n ? lse[(size_t)h * n + i] : INFINITY;
            sDi[st * BN + r] = i < n ? Di[(size_t)h * n + i] : 0.f;
        }
    };

    float ak[D / 8][4], av[D / 8][4];
#pragma unroll
    for (int t = 0; t < D / 8; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) ak[t][e] = av[t][e] = 0.f;

    int hh = kb.first_head(group), qt = kb.qstart;
    if (hh < group) load_q(hh, qt, 0);
    cp_commit();
    int st = 0;
    while (hh < group) {
        int nhh, nqt;
        kb.after(hh, qt, nhh, nqt);
        cp_wait_all();
        __syncthreads();
        if (nhh < group) load_q(nhh, nqt, st ^ 1);
        cp_commit();

        const int q0 = qt * BN, q1 = q0 + BN - 1;
        const bool wact = q0 <= kb.wmax && q1 >= kb.kw0;
        if (wact) {
            const bool full = kb.kw0 + 15 <= q0 && q1 <= kb.wmin && q1 < n;
            const bf16 *cQ = sQ + st * BN * LD, *cdO = sdO + st * BN * LD;
            const float *cLse = sLse + st * BN, *cDi = sDi + st * BN;
            float s[BN / 8][4];
#pragma unroll
            for (int t = 0; t < BN / 8; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
            mma_rows_bt<D>(s, sK, wk, cQ, lane);
            /* Pᵀ: rows are keys (ja, jb), columns queries */
#pragma unroll
            for (int t = 0; t < BN / 8; ++t) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int cc = t * 8 + (lane & 3) * 2 + e, i = q0 + cc;
                    const float l2 = cLse[cc];
                    const bool va = full || (kb.ja <= i && i <= kb.enda);
                    const bool vb = full || (kb.jb <= i && i <= kb.endb);
                    s[t][e] = va ? exp2f(s[t][e] * sl2 - l2) : 0.f;
                    s[t][2 + e] = vb ? exp2f(s[t][2 + e] * sl2 - l2) : 0.f;
                }
            }
            /* dV += Pᵀ · dO */
            mma_c_b<D>(av, s, cdO, lane);
            /* dPᵀ = V · dOᵀ */
            float dp[BN / 8][4];
#pragma unroll
            for (int t = 0; t < BN / 8; ++t) dp[t][0] = dp[t][1] = dp[t][2] = dp[t][3] = 0.f;
            mma_rows_bt<D>(dp, sV, wk, cdO, lane);
            /* dSᵀ = Pᵀ ∘ (dPᵀ − Di) · scale, into dp */
#pragma unroll
            for (int t = 0; t < BN / 8; ++t) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const float di = cDi[t * 8 + (lane & 3) * 2 + (e & 1)];
                    dp[t][e] = s[t][e] * (dp[t][e] - di) * scale;
                }
            }
            /* dK += dSᵀ · Q */
            mma_c_b<D>(ak, dp, cQ, lane);
            if constexpr (ATOMIC_DQ) { /* this warp's dSᵀ rows (its 16 keys × the tile's 64 queries) */
#pragma unroll
                for (int t = 0; t < BN / 8; ++t) {
                    bf16 *row = sdS + (wk + (lane >> 2)) * L::lds + t * 8 + (lane & 3) * 2;
                    *reinterpret_cast<uint32_t *>(row) = pack2(dp[t][0], dp[t][1]);
                    *reinterpret_cast<uint32_t *>(row + 8 * L::lds) = pack2(dp[t][2], dp[t][3]);
                }
            }
        }
        if constexpr (ATOMIC_DQ) {
            /* dQ[tile] += dS · K over the block's keys: the 8 warps split the 64×D tile into 4 row
             * groups × 2 column halves; a 16-key chunk whose warp saw nothing is all zero and skipped.
             * The partial sums go to dq (fp32) with atomics: other key blocks add to the same rows. */
            if (lane == 0) sAct[warp] = wact;
            __syncthreads(); /* every warp's dSᵀ rows and flag are in shared memory */
            static_assert(NW == 8 && BK / 16 == NW, "dQ split assumes 8 warps of 16 keys");
            constexpr int DW = D / 2;
            const int h = g * group + hh, mr = (warp & 3) * 16, d0 = (warp >> 2) * DW;
            float acc[DW / 8][4];
#pragma unroll
            for (int t = 0; t < DW / 8; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.f;
#pragma unroll
            for (int kc = 0; kc < BK / 16; ++kc) {
                if (!sAct[kc]) continue;
                uint32_t a[4]; /* A = dS (queries × keys) read transposed from dSᵀ [key][query] */
                ldsm_x4_t(a, sdS + (kc * 16 + (lane & 7) + ((lane >> 4) & 1) * 8) * L::lds + mr +
                                 ((lane >> 3) & 1) * 8);
#pragma unroll
                for (int dpair = 0; dpair < DW / 16; ++dpair) {
                    uint32_t b[4];
                    ldsm_x4_t(b, bt_addr<D>(sK, kc * 16, d0 + dpair * 16, lane));
                    mma(acc[2 * dpair], a, b[0], b[1]);
                    mma(acc[2 * dpair + 1], a, b[2], b[3]);
                }
            }
            /* (Splitting the columns in two passes to save registers measured 7% slower on the
             * H100 than this, spills included.) */
            const size_t os = (size_t)nh * D;
            red_add_frag<DW / 8>(dq + (size_t)(q0 + mr) * os + h * D + d0, os, n - (q0 + mr), &acc[0][0], lane);
        }
        hh = nhh;
        qt = nqt;
        st ^= 1;
    }
    cp_wait_all(); /* the K/V group when the block had nothing to do */

#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int j = (hf ? kb.jb : kb.ja);
        if (j >= n) continue;
        bf16 *rk = dk + (size_t)j * dks + g * D + (lane & 3) * 2;
        bf16 *rv = dv + (size_t)j * dvs + g * D + (lane & 3) * 2;
#pragma unroll
        for (int t = 0; t < D / 8; ++t) {
            *reinterpret_cast<uint32_t *>(rk + t * 8) = pack2(ak[t][hf * 2], ak[t][hf * 2 + 1]);
            *reinterpret_cast<uint32_t *>(rv + t * 8) = pack2(av[t][hf * 2], av[t][hf * 2 + 1]);
        }
    }
}


/* ------------------------------------------------------------------------------------------------ */
/* Paged attention on the tensor cores (serving, issue 28): one block = up to 64 query rows of one KV
 * head, gathered from anywhere in the step (a prefill chunk's tokens × the GQA group after a cached
 * prefix, or the decode tokens of up to 64/g sequences that share a cached prefix: cascade
 * attention), against a key range read through one block table. Every key of the range is visible
 * to every row (cached context only; the step's own tokens are FA2's), so the only mask is the
 * range's end. Rows: mrows[3r .. 3r+2] = (token, query head, destination) with destination =
 * partial slot · T2_PAGED_ROWS + row in slot, where the normalised fp32 partial output and its
 * base-2 lse go (paged_merge_kernel merges them). The arithmetic is fa2_fwd_kernel's: bf16 Q·Kᵀ on
 * mma.sync scaled by log2(e)/sqrt(d) in fp32, P rounded to bf16 for P·V, row sums of fp32 P. */

template <int D> struct PagedSmem {
    static constexpr int BR = 64;
    static constexpr size_t q = 0;
    static constexpr size_t k = q + (size_t)BR * Ld<D>::v * 2;
    static constexpr size_t v = k + 2ull * BN * Ld<D>::v * 2;
    static constexpr size_t bytes = v + 2ull * BN * Ld<D>::v * 2;
};

template <int D>
__global__ void __launch_bounds__(128, 2) paged_mma_kernel(float *part_o, float *part_lse, const bf16 *q, int qs,
                                                           const bf16 *kc, const bf16 *vc, const int32_t *tables,
                                                           const int32_t *mitems, const int32_t *mrows,
                                                           int block_size, int kvdim, float sl2) {
    typedef PagedSmem<D> L;
    constexpr int NT = 128, LD = Ld<D>::v, VPR = D / 8;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *sQ = (bf16 *)(smem + L::q), *sK = (bf16 *)(smem + L::k), *sV = (bf16 *)(smem + L::v);
    const int32_t *it = mitems + (size_t)blockIdx.x * 8;
    const int nrows = it[0], kvh = it[1], klo = it[2], khi = it[3], tbl = it[4];
    const int32_t *rows = mrows + it[5];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wr = warp * 16;

    for (int idx = threadIdx.x; idx < L::BR * VPR; idx += NT) {
        const int r = idx / VPR, c = idx - r * VPR;
        const bool ok = r < nrows;
        const bf16 *src = ok ? q + (size_t)rows[3 * r] * qs + rows[3 * r + 1] * D + c * 8 : q;
        cp_async16(sQ + r * LD + c * 8, src, ok);
    }
    auto load_kv = [&](int k0, int st) {
        for (int idx = threadIdx.x; idx < BN * VPR; idx += NT) {
            const int j = idx / VPR, c = idx - j * VPR, p = k0 + j;
            const bool ok = p < khi;
            size_t o = 0;
            if (ok) o = ((size_t)tables[tbl + p / block_size] * block_size + p % block_size) * kvdim + kvh * D + c * 8;
            cp_async16(sK + (st * BN + j) * LD + c * 8, kc + o, ok);
            cp_async16(sV + (st * BN + j) * LD + c * 8, vc + o, ok);
        }
    };
    if (klo < khi) load_kv(klo, 0);
    cp_commit();

    float o[D / 8][4];
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int t = 0; t < D / 8; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
    const bool active = wr < nrows;
    int st = 0;
    for (int k0 = klo; k0 < khi; k0 += BN) {
        cp_wait_all();
        __syncthreads(); /* tile k0 (and Q) landed; everyone is done with the other stage */
        if (k0 + BN < khi) load_kv(k0 + BN, st ^ 1);
        cp_commit();
        if (active) {
            const bool full = k0 + BN <= khi;
            const bf16 *cK = sK + st * BN * LD, *cV = sV + st * BN * LD;
            float s[BN / 8][4];
#pragma unroll
            for (int t = 0; t < BN / 8; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                uint32_t a[4];
                ldsm_x4(a, a_addr<D>(sQ, wr, kk * 16, lane));
#pragma unroll
                for (int np = 0; np < BN / 16; ++np) {
                    uint32_t b[4];
                    ldsm_x4(b, bn_addr<D>(cK, np * 16, kk * 16, lane));
                    mma(s[2 * np], a, b[0], b[1]);
                    mma(s[2 * np + 1], a, b[2], b[3]);
                }
            }
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                float mx = -INFINITY;
#pragma unroll
                for (int t = 0; t < BN / 8; ++t) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float x = s[t][hf * 2 + e] * sl2;
                        if (!full) x = k0 + t * 8 + (lane & 3) * 2 + e < khi ? x : -INFINITY;
                        s[t][hf * 2 + e] = x;
                        mx = fmaxf(mx, x);
                    }
                }
                mx = shfl_max4(mx);
                const float mnew = fmaxf(m[hf], mx);
                const float mref = mnew == -INFINITY ? 0.f : mnew;
                const float alpha = exp2f(m[hf] - mref);
                m[hf] = mnew;
                float sum = 0.f;
#pragma unroll
                for (int t = 0; t < BN / 8; ++t) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float pr = exp2f(s[t][hf * 2 + e] - mref);
                        s[t][hf * 2 + e] = pr;
                        sum += pr;
                    }
                }
                l[hf] = l[hf] * alpha + sum;
#pragma unroll
                for (int t = 0; t < D / 8; ++t) {
                    o[t][hf * 2] *= alpha;
                    o[t][hf * 2 + 1] *= alpha;
                }
            }
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk) {
                uint32_t a[4];
                c_to_a(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
                for (int dp = 0; dp < D / 16; ++dp) {
                    uint32_t b[4];
                    ldsm_x4_t(b, bt_addr<D>(cV, kk * 16, dp * 16, lane));
                    mma(o[2 * dp], a, b[0], b[1]);
                    mma(o[2 * dp + 1], a, b[2], b[3]);
                }
            }
        }
        st ^= 1;
    }
    cp_wait_all();
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const float sum = shfl_sum4(l[hf]);
        const int r = wr + (lane >> 2) + hf * 8;
        if (r < nrows) {
            const int dst = rows[3 * r + 2];
            const float inv = sum > 0.f ? 1.f / sum : 0.f;
            float *orow = part_o + (size_t)dst * D + (lane & 3) * 2;
#pragma unroll
            for (int t = 0; t < D / 8; ++t)
                *reinterpret_cast<float2 *>(orow + t * 8) = make_float2(o[t][hf * 2] * inv, o[t][hf * 2 + 1] * inv);
            if ((lane & 3) == 0) part_lse[dst] = sum > 0.f ? m[hf] + log2f(sum) : -INFINITY;
        }
    }
}

template <int D>
t2_status paged_mma_d(float *part_o, float *part_lse, const void *q, int qs, const void *kc, const void *vc,
                      const int32_t *tables, const int32_t *mitems, const int32_t *mrows, int nitems, int block_size,
                      int kvdim) {
    typedef PagedSmem<D> L;
    auto kern = paged_mma_kernel<D>;
    T2_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::bytes));
    const float sl2 = (float)(1.4426950408889634 / sqrt((double)D));
    kern<<<nitems, 128, L::bytes, t2_stream>>>(part_o, part_lse, (const bf16 *)q, qs, (const bf16 *)kc, (const bf16 *)vc,
                                               tables, mitems, mrows, block_size, kvdim, sl2);
    T2_LAUNCHED("paged_mma_kernel");
    return t2_ok();
}

constexpr int FWD_MT = 2, FWD_NW = 4; /* 128 query rows, 4 warps of 32 rows */
constexpr int DQ_NW = 4;              /* 64 query rows, 4 warps of 16 rows */
constexpr int DKV_NW = 8;             /* 128 keys, 8 warps of 16 keys */

template <int D>
t2_status fwd_d(void *out, float *lse, const void *q, const void *k, const void *v, int qs, int ks, int vs,
                const int32_t *send, const int32_t *bmax, int n, int nh, int nkv) {
    typedef FwdSmem<D, FWD_MT, FWD_NW> L;
    auto kern = fa2_fwd_kernel<D, FWD_MT, FWD_NW>;
    T2_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::bytes));
    dim3 grid(ceil_div(n, L::BR), nh);
    const float sl2 = (float)(1.4426950408889634 / sqrt((double)D));
    const int32_t *bmin = bmax + ceil_div(n, BN);
    kern<<<grid, FWD_NW * 32, L::bytes, t2_stream>>>((bf16 *)out, lse, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, qs,
                                          ks, vs, send, bmax, bmin, n, nh, nh / nkv, sl2);
    T2_LAUNCHED("fa2_fwd_kernel");
    return t2_ok();
}

template <int D>
t2_status bwd_d(float *dq, bool atomic_dq, void *dk, int dks, void *dv, int dvs, const float *Di, const void *dout,
                const float *lse, const void *q, const void *k, const void *v, int qs, int ks, int vs,
                const int32_t *send, const int32_t *bmax, int n, int nh, int nkv) {
    const float scale = (float)(1.0 / sqrt((double)D));
    const float sl2 = (float)(1.4426950408889634 / sqrt((double)D));
    const int32_t *bmin = bmax + ceil_div(n, BN);
    typedef DkvSmem<D, DKV_NW> L;
    const dim3 kv_grid(ceil_div(n, L::BK), nkv);
    if (atomic_dq) { /* dQ accumulated into the zeroed fp32 dq by the dK/dV kernel with atomics */
        T2_CUDA(cudaMemsetAsync(dq, 0, (size_t)n * nh * D * sizeof(float), t2_stream));
        auto kern = fa2_bwd_dkdv_kernel<D, DKV_NW, true>;
        T2_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::bytes_atomic));
        kern<<<kv_grid, DKV_NW * 32, L::bytes_atomic, t2_stream>>>((bf16 *)dk, dks, (bf16 *)dv, dvs, dq,
                                                         (const bf16 *)dout, lse, Di, (const bf16 *)q,
                                                         (const bf16 *)k, (const bf16 *)v, qs, ks, vs, send, bmax,
                                                         n, nh, nh / nkv, sl2, scale);
        T2_LAUNCHED("fa2_bwd_dkdv_kernel<atomic dQ>");
        return t2_ok();
    }
    {
        typedef DqSmem<D, DQ_NW> L;
        auto kern = fa2_bwd_dq_kernel<D, DQ_NW>;
        T2_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::bytes));
        dim3 grid(ceil_div(n, L::BR), nh);
        kern<<<grid, DQ_NW * 32, L::bytes, t2_stream>>>(dq, (const bf16 *)dout, lse, Di, (const bf16 *)q,
                                             (const bf16 *)k, (const bf16 *)v, qs, ks, vs, send, bmax, bmin, n, nh,
                                             nh / nkv, sl2, scale);
        T2_LAUNCHED("fa2_bwd_dq_kernel");
    }
    {
        auto kern = fa2_bwd_dkdv_kernel<D, DKV_NW, false>;
        T2_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::bytes_det));
        kern<<<kv_grid, DKV_NW * 32, L::bytes_det, t2_stream>>>((bf16 *)dk, dks, (bf16 *)dv, dvs, NULL, (const bf16 *)dout, lse,
                                                      Di, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, qs, ks,
                                                      vs, send, bmax, n, nh, nh / nkv, sl2, scale);
        T2_LAUNCHED("fa2_bwd_dkdv_kernel");
    }
    return t2_ok();
}

} // namespace

t2_status t2_attention_fwd_fa2(void *out, float *lse, const void *q, const void *k, const void *v, int q_stride,
                               int k_stride, int v_stride, const int32_t *subtree_end, const int32_t *blockmax,
                               int n, int nh, int nkv, int d) {
    switch (d) {
    case 64: return fwd_d<64>(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    case 128: return fwd_d<128>(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    }
    return t2_fail(-1, "t2_attention_fwd_fa2(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
}

t2_status t2_attention_bwd_fa2(float *dq, int atomic_dq, void *dk, int dk_stride, void *dv, int dv_stride,
                               const float *Di, const void *dout, const float *lse, const void *q, const void *k,
                               const void *v, int q_stride, int k_stride, int v_stride, const int32_t *subtree_end,
                               const int32_t *blockmax, int n, int nh, int nkv, int d) {
    switch (d) {
    case 64:
        return bwd_d<64>(dq, atomic_dq != 0, dk, dk_stride, dv, dv_stride, Di, dout, lse, q, k, v, q_stride,
                         k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    case 128:
        return bwd_d<128>(dq, atomic_dq != 0, dk, dk_stride, dv, dv_stride, Di, dout, lse, q, k, v, q_stride,
                          k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    }
    return t2_fail(-1, "t2_attention_bwd_fa2(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
}

extern "C" t2_status t2_paged_attention_mma(float *part_o, float *part_lse, const void *q, int q_stride, const void *kc,
                                            const void *vc, const int32_t *tables, const int32_t *mitems,
                                            const int32_t *mrows, int nitems, int block_size, int nkv, int d) {
    T2_REQUIRE(nitems > 0 && nkv > 0 && block_size > 0 && q_stride % 8 == 0 && aligned16(q) && aligned16(kc) &&
                   aligned16(vc),
               "t2_paged_attention_mma(shape)");
    switch (d) {
    case 64: return paged_mma_d<64>(part_o, part_lse, q, q_stride, kc, vc, tables, mitems, mrows, nitems, block_size, nkv * 64);
    case 128: return paged_mma_d<128>(part_o, part_lse, q, q_stride, kc, vc, tables, mitems, mrows, nitems, block_size, nkv * 128);
    }
    return t2_fail(-1, "t2_paged_attention_mma(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
}
