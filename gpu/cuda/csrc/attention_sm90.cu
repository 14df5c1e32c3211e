/*
 * attention_sm90.cu: tree attention, forward and backward, on Hopper's warpgroup MMA (wgmma,
 * sm_90a): the T2_ATT_HOPPER kernels (attention.cu dispatches). The backward is described above
 * its kernel; the forward:
 *
 * Same mask, outputs and base-2 lse as attention_fa2.cu: key j is visible to query i iff
 * j ≤ i ≤ subtree_end[j]; tile skipping and the unmasked fast path use the same per-64-key block
 * maxima/minima of subtree_end (t2_tree_blockmax). What changes is how the products run:
 *   - a block is NWG warpgroups; warpgroup g owns 64 query rows and issues its products as
 *     wgmma.m64nNk16: S = Q·Kᵀ (m64n64, both operands read by the tensor cores straight from
 *     shared memory through matrix descriptors, no ldmatrix) and O += P·V (m64n{D}, P from
 *     registers — the S accumulator repacked to bf16 in place, V read transposed from shared
 *     memory);
 *   - the products are asynchronous, and each warpgroup overlaps them with its own softmax as
 *     FlashAttention-3 does within a warpgroup: S of this tile and P·V of the previous one are
 *     issued together, only S is waited for, and this tile's softmax runs while P·V is still on
 *     the tensor cores;
 *   - tiles are staged in the no-swizzle core-matrix layout (wgmma.cuh), so the cp.async copy of a
 *     tile writes shared memory linearly: 16-byte chunk number c of a tile lands at byte 16·c, and
 *     a warp's 32 chunks are 512 contiguous bytes (no bank conflicts, no padding);
 *   - K/V tiles rotate through 3 stages with cp.async: while S reads one and P·V another, the
 *     next tile loads into the third; one barrier per tile publishes a tile and frees a stage.
 * Not (yet) FlashAttention-3's TMA loads, producer/consumer warp specialization or ping-pong
 * scheduling: see docs/PERFORMANCE.md for what this kernel reaches and what those would add.
 *
 * Built for sm_90a only (the Makefile's default GPU_ARCH); for any other target the kernel body is
 * empty and t2_attention_sm90_available reports 0, so the Go side refuses the "hopper" kernels
 * with an error instead of running an empty kernel.
 * defines: t2_attention_sm90_available, t2_attention_fwd_sm90, t2_attention_bwd_sm90 (the last two
 * declared in attention_impl.h)
 */
#include "common.cuh"
#include "attention_impl.h"
#include "tile.cuh"
#include "vec.cuh"
#include "wgmma.cuh"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr int BN = 64;    /* keys per tile = t2_tree_blockmax's granularity */
constexpr int NWG = 3;    /* warpgroups per block: 192 query rows (2: 128 rows, 18% slower on 16k-token chains) */
constexpr int STAGES = 3; /* K/V tiles in shared memory: the one being loaded, the one S reads, the one P·V reads */

/* Byte size of a rows × D bf16 tile in the core-matrix layout (8-row groups of D/8 core matrices). */
template <int D> __host__ __device__ constexpr int tile_bytes(int rows) { return rows * D * 2; }

template <int D> struct Smem {
    static constexpr int BR = 64 * NWG;
    static constexpr size_t q = 0;
    static constexpr size_t k = q + tile_bytes<D>(BR);
    static constexpr size_t v = k + (size_t)STAGES * tile_bytes<D>(BN);
    static constexpr size_t end = v + (size_t)STAGES * tile_bytes<D>(BN);
    static constexpr size_t bytes = end + (size_t)STAGES * BN * 4;
};

/* rows × D bf16 rows from src (row stride in elements) starting at global row row0 into a shared tile
 * in the core-matrix layout, rows ≥ n zeroed. Chunk idx (16 bytes) goes to byte 16·idx: within an
 * 8-row group the 8 rows of one 16-byte column chunk are consecutive (one core matrix), then the
 * D/8 column chunks, then the next 8-row group. */
template <int D, int ROWS, int NT>
__device__ __forceinline__ void load_tile(unsigned char *dst, const bf16 *src, int stride, int row0, int n) {
    constexpr int CPR = D / 8; /* 16-byte chunks per row */
#pragma unroll
    for (int idx = threadIdx.x; idx < ROWS * CPR; idx += NT) {
        const int r8 = idx & 7, rest = idx >> 3;
        const int c = rest % CPR, rg = rest / CPR;
        const int row = row0 + rg * 8 + r8;
        const bool ok = row < n;
        cp_async16(dst + (size_t)idx * 16, src + (size_t)(ok ? row : 0) * stride + c * 8, ok);
    }
}

/* The two products for one warpgroup and one key tile. Q and K tiles are K-major (K = head dim):
 * core matrices along K are 128 bytes apart (LBO), 8-row groups D·16 bytes apart (SBO); one k16
 * step is two core matrices, 256 bytes. V is the B operand of P·V stored N-major (its rows are
 * keys = the K dimension of that product, its columns the head dim = N): LBO = D·16 bytes between
 * 8-key groups, SBO = 128 bytes between 8-column groups; one k16 step is two 8-key groups. */
template <int D>
__device__ __forceinline__ void qk_product(float s[32], uint32_t q_addr, uint32_t k_addr) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
        wg::wgmma_ss_n64(s, wg::desc(q_addr + kk * 256, 128, D * 16), wg::desc(k_addr + kk * 256, 128, D * 16),
                         kk > 0);
}

template <int D>
__device__ __forceinline__ void pv_product(float (&o)[D / 2], const uint32_t pa[BN / 16][4], uint32_t v_addr) {
#pragma unroll
    for (int kc = 0; kc < BN / 16; ++kc) {
        const uint64_t bd = wg::desc(v_addr + kc * 2 * D * 16, D * 16, 128);
        if constexpr (D == 128)
            wg::wgmma_rs_n128_tb(o, pa[kc], bd);
        else
            wg::wgmma_rs_n64_tb(o, pa[kc], bd);
    }
}

template <int D>
__global__ void __launch_bounds__(NWG * 128, 1)
    sm90_fwd_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int qs, int ks, int vs,
                    const int32_t *send, const int32_t *bmax, const int32_t *bmin, int n, int nh, int group,
                    float sl2) {
#if T2_HAS_WGMMA
    typedef Smem<D> L;
    constexpr int BR = L::BR, NT = NWG * 128;
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *sQ = smem + L::q, *sK = smem + L::k, *sV = smem + L::v;
    int *sEnd = (int *)(smem + L::end);

    const int qb = gridDim.x - 1 - blockIdx.x; /* the longest rows (most keys) start first */
    const int h = blockIdx.y, g = h / group;
    const int q0 = qb * BR;
    const int wgi = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int r0 = q0 + wgi * 64, r1 = r0 + 63;      /* this warpgroup's rows */
    const int row_a = r0 + warp * 16 + (lane >> 2); /* the thread's rows: row_a and row_a + 8 */
    const bf16 *kg = k + g * D, *vg = v + g * D;
    const int kend = min(q0 + BR - 1, n - 1) / BN;
    const uint32_t q_addr = smem_u32(sQ) + wgi * tile_bytes<D>(64);
    const uint32_t k_addr = smem_u32(sK), v_addr = smem_u32(sV);

    /* the block's next key tile at or after kb that some row of the block can see (kend + 1: none) */
    auto next_tile = [&](int kb) {
        while (kb <= kend && bmax[kb] < q0) ++kb;
        return kb;
    };
    auto load_kv = [&](int kb, int st) {
        if (kb > kend) return;
        load_tile<D, BN, NT>(sK + st * tile_bytes<D>(BN), kg, ks, kb * BN, n);
        load_tile<D, BN, NT>(sV + st * tile_bytes<D>(BN), vg, vs, kb * BN, n);
        for (int i = threadIdx.x; i < BN; i += NT) sEnd[st * BN + i] = kb * BN + i < n ? send[kb * BN + i] : -1;
    };

    /* Tile t of the block's key-tile sequence lives in stage t mod STAGES; it loads while tile t−1 is
     * in use, and the stage it overwrites held tile t−3, whose last reader (P·V, issued at tile
     * t−2) every warpgroup has waited for before the barrier that precedes the load. */
    load_tile<D, BR, NT>(sQ, q + h * D, qs, q0, n);
    int kb = next_tile(0);
    load_kv(kb, 0);
    cp_commit();

    float s[32], o[D / 2];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.f;
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2] = {1.f, 1.f};
    uint32_t pa[BN / 16][4] = {}; /* P of the previous tile, the A operand of its P·V */
    int st = 0, pst = 0;          /* stages of this tile and of the previous one */

    /* FlashAttention-3's intra-warpgroup overlap: per tile, S = Q·Kᵀ of this tile and P·V of the
     * previous one are issued back to back; the softmax of this tile waits only for S and runs while
     * P·V is still on the tensor cores. Every product is issued unconditionally — a tile no row of
     * this warpgroup sees is computed and masked to zero, and the first tile's "previous P·V" is
     * P = 0 against its own (valid) V — because ptxas serializes every wgmma of a kernel in which one
     * sits under a data-dependent branch (C7520), and it must see each pipeline stage opened and
     * closed within the loop body (C7515). */
    while (kb <= kend) {
        cp_wait_all(); /* tile kb landed (this thread's part) */
        wg::fence_proxy_async();
        __syncthreads(); /* tile kb visible to all; the stage loaded next is free */
        const int nkb = next_tile(kb + 1);
        const int nst = st + 1 == STAGES ? 0 : st + 1;
        load_kv(nkb, nst);
        cp_commit();

#pragma unroll
        for (int t = 0; t < D / 8; ++t) { /* the previous tile's rescale, before its P·V (and before
                                             S is issued: ptxas otherwise waits for S first, C7517) */
            o[4 * t] *= alpha[0];
            o[4 * t + 1] *= alpha[0];
            o[4 * t + 2] *= alpha[1];
            o[4 * t + 3] *= alpha[1];
        }
        wg::fence_operand(s);
        wg::fence_operand(o);
        keep_live(pa);
        wg::fence();
        qk_product<D>(s, q_addr, k_addr + st * tile_bytes<D>(BN));
        wg::commit();
        pv_product<D>(o, pa, v_addr + pst * tile_bytes<D>(BN));
        wg::commit();
        wg::wait<1>(); /* S (committed first); P·V keeps running */
        wg::fence_operand(s);

        const int k0 = kb * BN;
        const bool full = k0 + BN - 1 <= r0 && r1 <= bmin[kb] && r1 < n;
        const int *cEnd = sEnd + st * BN;
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) { /* online softmax in the base-2 domain on the thread's two rows */
            const int i = row_a + hf * 8;
            float mx = -INFINITY;
#pragma unroll
            for (int t = 0; t < BN / 8; ++t) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float x = s[4 * t + 2 * hf + e] * sl2;
                    if (!full) {
                        const int jj = t * 8 + (lane & 3) * 2 + e;
                        x = (k0 + jj <= i && i <= cEnd[jj]) ? x : -INFINITY;
                    }
                    s[4 * t + 2 * hf + e] = x;
                    mx = fmaxf(mx, x);
                }
            }
            mx = shfl_max4(mx);
            const float mnew = fmaxf(m[hf], mx);
            const float mref = mnew == -INFINITY ? 0.f : mnew; /* a row with nothing visible yet */
            alpha[hf] = exp2f(m[hf] - mref);
            m[hf] = mnew;
            float sum = 0.f;
#pragma unroll
            for (int t = 0; t < BN / 8; ++t) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float p = exp2f(s[4 * t + 2 * hf + e] - mref);
                    s[4 * t + 2 * hf + e] = p;
                    sum += p;
                }
            }
            l[hf] = l[hf] * alpha[hf] + sum;
        }
        wg::wait<0>(); /* the previous tile's P·V: pa and its stage are free */
        wg::fence_operand(o);
        keep_live(pa);
        pack_p(pa, s);
        pst = st;
        st = nst;
        kb = nkb;
    }
    /* the last tile's P·V */
#pragma unroll
    for (int t = 0; t < D / 8; ++t) {
        o[4 * t] *= alpha[0];
        o[4 * t + 1] *= alpha[0];
        o[4 * t + 2] *= alpha[1];
        o[4 * t + 3] *= alpha[1];
    }
    wg::fence_operand(o);
    keep_live(pa);
    wg::fence();
    pv_product<D>(o, pa, v_addr + pst * tile_bytes<D>(BN));
    wg::commit();
    wg::wait<0>();
    wg::fence_operand(o);
    keep_live(pa);

    const size_t os = (size_t)nh * D;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const float sum = shfl_sum4(l[hf]);
        const int i = row_a + hf * 8;
        if (i < n) {
            const float inv = sum > 0.f ? 1.f / sum : 0.f;
            bf16 *orow = out + (size_t)i * os + h * D + (lane & 3) * 2;
#pragma unroll
            for (int t = 0; t < D / 8; ++t)
                *reinterpret_cast<uint32_t *>(orow + t * 8) = pack2(o[4 * t + 2 * hf] * inv, o[4 * t + 2 * hf + 1] * inv);
            if ((lane & 3) == 0) lse[(size_t)h * n + i] = m[hf] + log2f(sum);
        }
    }
#endif
}

/* ------------------------------------------------------------------------------------------------ */
/* backward: dK, dV and (atomically) dQ, FlashAttention-2's scheme on wgmma.
 *
 * A block owns BK = 128 keys of KV head g (two warpgroups of 64 keys; warp w of the block owns keys
 * k0 + 16w… as in the FA2 kernel, so the same per-warp visibility bounds apply) and loops over the
 * query heads of the GQA group and the 64-query tiles that can see its keys. Per tile and
 * warpgroup, with keys as the M dimension so every product's A operand is at hand:
 *   Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ  (m64n64, both operands K-major in shared memory)
 *   Pᵀ = exp2(Sᵀ·log2e/√d − lse), dSᵀ = Pᵀ∘(dPᵀ − Di)/√d  (registers; masked entries 0)
 *   dV += Pᵀ·dO, dK += dSᵀ·Q  (m64n{D}, A from registers, B = the dO/Q tile read transposed)
 * dSᵀ also goes to shared memory (bf16), then dQ[tile] = dS·K over the block's 128 keys runs as
 * m64n{D/2} per warpgroup (each takes half the columns; A = dS read transposed from dSᵀ, B = the
 * K block read transposed) and is added to the fp32 dq with 16-byte atomics. */

template <int D> struct BwdSmem {
    static constexpr int BK = 128, BQ = 64;
    static constexpr size_t k = 0;
    static constexpr size_t v = k + tile_bytes<D>(BK);
    static constexpr size_t q = v + tile_bytes<D>(BK);                        /* 2 stages */
    static constexpr size_t dout = q + 2ull * tile_bytes<D>(BQ);              /* 2 stages */
    static constexpr size_t ds = dout + 2ull * tile_bytes<D>(BQ);             /* dSᵀ [BK][BQ] bf16 */
    static constexpr size_t lse = ds + (size_t)BK * BQ * 2;                   /* 2 stages */
    static constexpr size_t di = lse + 2ull * BQ * 4;                         /* 2 stages */
    static constexpr size_t wmax = di + 2ull * BQ * 4;                        /* 8 ints */
    static constexpr size_t bytes = wmax + 8 * 4;
};

/* Byte offset of element (key r, query c) of the dSᵀ tile [128][64] in the core-matrix layout: 8 keys
 * × 8 queries per 128-byte core matrix, the 8 query chunks of an 8-key group contiguous. Read as the
 * A operand of dQ = dS·K (M = queries, K = keys) it is M-major: SBO = 128 bytes between 8-query
 * groups, LBO = 1024 bytes between 8-key groups. */
__device__ __forceinline__ uint32_t ds_off(int r, int c) {
    return (uint32_t)((r >> 3) * 1024 + (c >> 3) * 128 + (r & 7) * 16 + (c & 7) * 2);
}

template <int D>
__global__ void __launch_bounds__(256, 1)
    sm90_bwd_kernel(bf16 *dk, int dks, bf16 *dv, int dvs, float *dq, const bf16 *dout, const float *lse,
                    const float *Di, const bf16 *q, const bf16 *k, const bf16 *v, int qs, int ks, int vs,
                    const int32_t *send, const int32_t *bmax, int n, int nh, int group, float sl2, float scale) {
#if T2_HAS_WGMMA
    typedef BwdSmem<D> L;
    constexpr int BK = L::BK, BQ = L::BQ, NT = 256, NW = 8;
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char *sK = smem + L::k, *sV = smem + L::v, *sQ = smem + L::q, *sdO = smem + L::dout,
                  *sdS = smem + L::ds;
    float *sLse = (float *)(smem + L::lse), *sDi = (float *)(smem + L::di);
    int *sWmax = (int *)(smem + L::wmax);

    const int g = blockIdx.y;
    const int k0 = blockIdx.x * BK;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wgi = warp >> 2;
    const uint32_t kaddr = smem_u32(sK), vaddr = smem_u32(sV), qaddr = smem_u32(sQ), doaddr = smem_u32(sdO),
                   dsaddr = smem_u32(sdS);
    const uint32_t k_wg = kaddr + wgi * tile_bytes<D>(64), v_wg = vaddr + wgi * tile_bytes<D>(64);

    load_tile<D, BK, NT>(sK, k + g * D, ks, k0, n);
    load_tile<D, BK, NT>(sV, v + g * D, vs, k0, n);

    KeyBlock<NW, BQ> kb; /* this block's keys and the query tiles that see them */
    kb.init(sWmax, send, bmax, k0, n, warp, lane);
    auto load_q = [&](int hh, int qt, int st) {
        const int h = g * group + hh, q0 = qt * BQ;
        load_tile<D, BQ, NT>(sQ + st * tile_bytes<D>(BQ), q + h * D, qs, q0, n);
        load_tile<D, BQ, NT>(sdO + st * tile_bytes<D>(BQ), dout + h * D, nh * D, q0, n);
        for (int r = threadIdx.x; r < BQ; r += NT) {
            const int i = q0 + r;
            sLse[st * BQ + r] = i < n ? lse[(size_t)h * n + i] : INFINITY;
            sDi[st * BQ + r] = i < n ? Di[(size_t)h * n + i] : 0.f;
        }
    };

    float ak[D / 2], av[D / 2], s[32], dp[32], acc[D / 4];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) ak[i] = av[i] = 0.f;
    uint32_t pa[BQ / 16][4] = {}, da[BQ / 16][4] = {};

    int hh = kb.first_head(group), qt = kb.qstart;
    if (hh < group) load_q(hh, qt, 0);
    cp_commit();
    int st = 0;
    while (hh < group) {
        int nhh, nqt;
        kb.after(hh, qt, nhh, nqt);
        cp_wait_all();
        wg::fence_proxy_async();
        __syncthreads(); /* tile landed; every warpgroup is done with the other stage and with dSᵀ */
        if (nhh < group) load_q(nhh, nqt, st ^ 1);
        cp_commit();

        const int q0 = qt * BQ, q1 = q0 + BQ - 1;
        const uint32_t q_st = qaddr + st * tile_bytes<D>(BQ), do_st = doaddr + st * tile_bytes<D>(BQ);
        /* Sᵀ and dPᵀ for this warpgroup's 64 keys, issued unconditionally (a warpgroup that sees
         * nothing of the tile computes it and masks it to zero: see the forward on C7520) */
#pragma unroll
        for (int i = 0; i < 32; ++i) s[i] = dp[i] = 0.f; /* fresh values: last tile's are dead, not loop-carried */
        wg::fence_operand(s);
        wg::fence_operand(dp);
        wg::fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            wg::wgmma_ss_n64(s, wg::desc(k_wg + kk * 256, 128, D * 16), wg::desc(q_st + kk * 256, 128, D * 16), kk > 0);
        wg::commit();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            wg::wgmma_ss_n64(dp, wg::desc(v_wg + kk * 256, 128, D * 16), wg::desc(do_st + kk * 256, 128, D * 16),
                             kk > 0);
        wg::commit();
        wg::wait<1>(); /* Sᵀ: Pᵀ is computed while dPᵀ is still on the tensor cores */
        wg::fence_operand(s);

        /* Pᵀ and dSᵀ: this thread's rows are keys ja, jb; columns are queries */
        const bool wact = q0 <= kb.wmax && q1 >= kb.kw0;
        const bool full = kb.kw0 + 15 <= q0 && q1 <= kb.wmin && q1 < n;
        const float *cLse = sLse + st * BQ, *cDi = sDi + st * BQ;
        const int kr = (warp & 3) * 16 + (lane >> 2); /* the thread's first key row within its warpgroup */
#pragma unroll
        for (int t = 0; t < BQ / 8; ++t) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int cc = t * 8 + (lane & 3) * 2 + e, i = q0 + cc;
                const float l2 = cLse[cc];
                const bool va = wact && (full || (kb.ja <= i && i <= kb.enda));
                const bool vb = wact && (full || (kb.jb <= i && i <= kb.endb));
                s[4 * t + e] = va ? exp2f(s[4 * t + e] * sl2 - l2) : 0.f;
                s[4 * t + 2 + e] = vb ? exp2f(s[4 * t + 2 + e] * sl2 - l2) : 0.f;
            }
        }
        wg::wait<0>(); /* dPᵀ */
        wg::fence_operand(dp);
#pragma unroll
        for (int t = 0; t < BQ / 8; ++t) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const float di = cDi[t * 8 + (lane & 3) * 2 + e];
                dp[4 * t + e] = s[4 * t + e] * (dp[4 * t + e] - di) * scale;
                dp[4 * t + 2 + e] = s[4 * t + 2 + e] * (dp[4 * t + 2 + e] - di) * scale;
            }
        }
        pack_p(pa, s);
        pack_p(da, dp);
        /* dSᵀ rows of this warpgroup's keys into shared memory for dQ */
#pragma unroll
        for (int t = 0; t < BQ / 8; ++t) {
            const int c = t * 8 + (lane & 3) * 2, r = wgi * 64 + kr;
            *reinterpret_cast<uint32_t *>(sdS + ds_off(r, c)) = pack2(dp[4 * t], dp[4 * t + 1]);
            *reinterpret_cast<uint32_t *>(sdS + ds_off(r + 8, c)) = pack2(dp[4 * t + 2], dp[4 * t + 3]);
        }
        wg::fence_proxy_async();
        __syncthreads(); /* both warpgroups' dSᵀ rows are in shared memory */

        /* dQ[tile][wgi·D/2 …] = dS · K[:, wgi·D/2 …] over the block's 128 keys, issued first so its
         * atomics overlap dV += Pᵀ·dO and dK += dSᵀ·Q, which follow it on the tensor cores */
#pragma unroll
        for (int i = 0; i < D / 4; ++i) acc[i] = 0.f;
        wg::fence_operand(acc);
        wg::fence_operand(av);
        wg::fence_operand(ak);
        keep_live(pa);
        keep_live(da);
        wg::fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            const uint64_t a = wg::desc(dsaddr + kk * 2 * 1024, 1024, 128);
            const uint64_t b = wg::desc(kaddr + kk * 2 * D * 16 + wgi * (D / 16) * 128, D * 16, 128);
            if constexpr (D == 128)
                wg::wgmma_ss_n64_tt(acc, a, b, kk > 0);
            else
                wg::wgmma_ss_n32_tt(acc, a, b, kk > 0);
        }
        wg::commit();
#pragma unroll
        for (int kc = 0; kc < BQ / 16; ++kc) {
            const uint64_t bo = wg::desc(do_st + kc * 2 * D * 16, D * 16, 128);
            const uint64_t bq = wg::desc(q_st + kc * 2 * D * 16, D * 16, 128);
            if constexpr (D == 128) {
                wg::wgmma_rs_n128_tb(av, pa[kc], bo);
                wg::wgmma_rs_n128_tb(ak, da[kc], bq);
            } else {
                wg::wgmma_rs_n64_tb(av, pa[kc], bo);
                wg::wgmma_rs_n64_tb(ak, da[kc], bq);
            }
        }
        wg::commit();
        wg::wait<1>(); /* dQ (committed first) */
        wg::fence_operand(acc);
        {
            const int h = g * group + hh, r0 = q0 + (warp & 3) * 16;
            const size_t os = (size_t)nh * D;
            red_add_frag<D / 16>(dq + (size_t)r0 * os + h * D + wgi * (D / 2), os, n - r0, acc, lane);
        }
        wg::wait<0>(); /* dV, dK: pa, da, the stage and dSᵀ are free */
        wg::fence_operand(av);
        wg::fence_operand(ak);
        keep_live(pa);
        keep_live(da);
        hh = nhh;
        qt = nqt;
        st ^= 1;
    }
    cp_wait_all(); /* the K/V group when the block had nothing to do */

#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const int j = hf ? kb.jb : kb.ja;
        if (j >= n) continue;
        bf16 *rk = dk + (size_t)j * dks + g * D + (lane & 3) * 2;
        bf16 *rv = dv + (size_t)j * dvs + g * D + (lane & 3) * 2;
#pragma unroll
        for (int t = 0; t < D / 8; ++t) {
            *reinterpret_cast<uint32_t *>(rk + t * 8) = pack2(ak[4 * t + 2 * hf], ak[4 * t + 2 * hf + 1]);
            *reinterpret_cast<uint32_t *>(rv + t * 8) = pack2(av[4 * t + 2 * hf], av[4 * t + 2 * hf + 1]);
        }
    }
#endif
}

template <int D>
t2_status bwd_d(float *dq, void *dk, int dks, void *dv, int dvs, const float *Di, const void *dout, const float *lse,
                const void *q, const void *k, const void *v, int qs, int ks, int vs, const int32_t *send,
                const int32_t *bmax, int n, int nh, int nkv) {
    typedef BwdSmem<D> L;
    const float scale = (float)(1.0 / sqrt((double)D));
    const float sl2 = (float)(1.4426950408889634 / sqrt((double)D));
    T2_CUDA(cudaMemsetAsync(dq, 0, (size_t)n * nh * D * sizeof(float), t2_stream));
    auto kern = sm90_bwd_kernel<D>;
    T2_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::bytes));
    const dim3 grid(ceil_div(n, L::BK), nkv);
    kern<<<grid, 256, L::bytes, t2_stream>>>((bf16 *)dk, dks, (bf16 *)dv, dvs, dq, (const bf16 *)dout, lse, Di,
                                             (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, qs, ks, vs, send,
                                             bmax, n, nh, nh / nkv, sl2, scale);
    T2_LAUNCHED("sm90_bwd_kernel");
    return t2_ok();
}

/* Writes 1 when this library's device code was built with wgmma (sm_90a) and runs on this device. */
__global__ void sm90_probe_kernel(int *ok) { *ok = T2_HAS_WGMMA; }

template <int D>
t2_status fwd_d(void *out, float *lse, const void *q, const void *k, const void *v, int qs, int ks, int vs,
                const int32_t *send, const int32_t *bmax, int n, int nh, int nkv) {
    typedef Smem<D> L;
    auto kern = sm90_fwd_kernel<D>;
    T2_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::bytes));
    dim3 grid(ceil_div(n, L::BR), nh);
    const float sl2 = (float)(1.4426950408889634 / sqrt((double)D));
    const int32_t *bmin = bmax + ceil_div(n, BN);
    kern<<<grid, NWG * 128, L::bytes, t2_stream>>>((bf16 *)out, lse, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
                                                   qs, ks, vs, send, bmax, bmin, n, nh, nh / nkv, sl2);
    T2_LAUNCHED("sm90_fwd_kernel");
    return t2_ok();
}

} // namespace

extern "C" t2_status t2_attention_sm90_available(int *available) {
    *available = 0;
    int dev = 0, major = 0;
    T2_CUDA(cudaGetDevice(&dev));
    T2_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major != 9) return t2_ok(); /* sm_90a code runs on compute capability 9.0 only */
    int *flag = NULL;
    T2_CUDA(cudaMalloc(&flag, sizeof(int)));
    T2_CUDA(cudaMemset(flag, 0, sizeof(int)));
    sm90_probe_kernel<<<1, 1>>>(flag);
    cudaError_t e = cudaGetLastError(); /* no kernel image for this device: not available, not an error */
    if (e == cudaSuccess) e = cudaMemcpy(available, flag, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(flag);
    if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
        *available = 0;
        return t2_ok();
    }
    T2_CUDA(e);
    return t2_ok();
}

t2_status t2_attention_fwd_sm90(void *out, float *lse, const void *q, const void *k, const void *v, int q_stride,
                                int k_stride, int v_stride, const int32_t *subtree_end, const int32_t *blockmax,
                                int n, int nh, int nkv, int d) {
    const char *dev = getenv("T2_SM90_FWD"); /* DEV: v1 = the cp.async kernel, ws = no ping-pong */
    if (dev == NULL || strcmp(dev, "v1") != 0)
        return t2_attention_fwd_sm90_ws(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh,
                                        nkv, d, dev == NULL || strcmp(dev, "ws") != 0);
    switch (d) {
    case 64: return fwd_d<64>(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    case 128: return fwd_d<128>(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    }
    return t2_fail(-1, "t2_attention_fwd_sm90(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
}

t2_status t2_attention_bwd_sm90(float *dq, void *dk, int dk_stride, void *dv, int dv_stride, const float *Di,
                                const void *dout, const float *lse, const void *q, const void *k, const void *v,
                                int q_stride, int k_stride, int v_stride, const int32_t *subtree_end,
                                const int32_t *blockmax, int n, int nh, int nkv, int d) {
    switch (d) {
    case 64:
        return bwd_d<64>(dq, dk, dk_stride, dv, dv_stride, Di, dout, lse, q, k, v, q_stride, k_stride, v_stride,
                         subtree_end, blockmax, n, nh, nkv);
    case 128:
        return bwd_d<128>(dq, dk, dk_stride, dv, dv_stride, Di, dout, lse, q, k, v, q_stride, k_stride, v_stride,
                          subtree_end, blockmax, n, nh, nkv);
    }
    return t2_fail(-1, "t2_attention_bwd_sm90(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
}
