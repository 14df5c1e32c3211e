/*
 * attention_sm90_bwd.cu: the backward of the T2_ATT_HOPPER tree attention (attention.cu dispatches):
 * dK, dV and (atomically) dQ, FlashAttention-2's scheme on Hopper's warpgroup MMA (wgmma, sm_90a),
 * described above the kernel. Same mask and base-2 lse as attention_fa2.cu and attention_sm90_fwd.cu.
 *
 * Built for sm_90a only; elsewhere the kernel body is empty and t2_attention_sm90_available (in
 * attention_sm90_fwd.cu) reports 0, so the Go side never selects it there.
 * defines: t2_attention_bwd_sm90 (declared in attention_impl.h)
 */
#include "common.cuh"
#include "attention_impl.h"
#include "tile.cuh"
#include "tma.cuh"
#include "vec.cuh"
#include "wgmma.cuh"
#include <math.h>
#include <stdint.h>

#if defined(CUDART_VERSION) && CUDART_VERSION >= 12000 /* TMA: CUDA 12 */
namespace {

/* Byte size of a rows × D bf16 tile in the core-matrix layout (8-row groups of D/8 core matrices). */
template <int D> __host__ __device__ constexpr int tile_bytes(int rows) { return rows * D * 2; }

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

/* A block owns BK = 128 keys of KV head g (two warpgroups of 64 keys; warp w of the block owns keys
 * k0 + 16w… as in the FA2 kernel, so the same per-warp visibility bounds apply) and loops over the
 * query heads of the GQA group and the 64-query tiles that can see its keys. Per tile and
 * warpgroup, with keys as the M dimension so every product's A operand is at hand:
 *   Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ  (m64n64, both operands K-major in shared memory)
 *   Pᵀ = exp2(Sᵀ·log2e/√d − lse), dSᵀ = Pᵀ∘(dPᵀ − Di)/√d  (registers; masked entries 0)
 *   dV += Pᵀ·dO, dK += dSᵀ·Q  (m64n{D}, A from registers, B = the dO/Q tile read transposed)
 * dSᵀ also goes to shared memory (bf16), then dQ[tile] = dS·K over the block's 128 keys runs as
 * m64n{D/2} per warpgroup (each takes half the columns; A = dS read transposed from dSᵀ, B = the
 * K block read transposed). The two warpgroups' dQ halves go to a shared-memory buffer (fp32, 128-byte
 * swizzled) and one thread adds the whole tile into the fp32 dq with TMA reductions at the next
 * tile's barrier — the math warps' 16-byte atomics it replaces cost a fifth of the kernel's time.
 * The block's K and V are staged once with cp.async (no-swizzle layout); each query tile's Q and dO
 * arrive by TMA (128-byte swizzled, issued by one thread a tile ahead into the other of two stages)
 * and its lse and Di by cp.async from warp 0, all completing on the stage's mbarrier. */

template <int D> struct BwdSmem {
    static constexpr int BK = 128, BQ = 64;
    static_assert(BK == 128, "t2_tree_blockmax's launch orders count 128-key blocks");
    static constexpr int QB = BQ * D * 2;                       /* one Q or dO tile: D/64 panels of BQ × 128 bytes */
    static constexpr size_t k = 0;
    static constexpr size_t v = k + tile_bytes<D>(BK);
    static constexpr size_t q = v + tile_bytes<D>(BK);          /* 2 stages, 1024-byte aligned (swizzle atoms) */
    static constexpr size_t dout = q + 2ull * QB;               /* 2 stages */
    static constexpr size_t ds = dout + 2ull * QB;              /* dSᵀ [BK][BQ] bf16 */
    static constexpr int DQB = BQ * D * 4;                      /* one dQ tile, fp32: D/32 panels of BQ × 128 bytes */
    static constexpr size_t dq = ds + (size_t)BK * BQ * 2;      /* 2 buffers, 1024-byte aligned */
    static constexpr size_t lse = dq + 2ull * DQB;              /* 2 stages */
    static constexpr size_t di = lse + 2ull * BQ * 4;           /* 2 stages */
    static constexpr size_t wmax = di + 2ull * BQ * 4;          /* 8 ints */
    static constexpr size_t bar = wmax + 8 * 4;                 /* 2 mbarriers */
    static constexpr size_t bytes = bar + 2 * 8 + 1024;         /* + slack to align the base to 1024 */
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
    sm90_bwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tdo,
                    const __grid_constant__ CUtensorMap tdq, bf16 *dk, int dks, bf16 *dv, int dvs, const float *lse,
                    const float *Di, const bf16 *k, const bf16 *v, int ks, int vs, const int32_t *send,
                    const int32_t *bmax, const int32_t *order, int n, int nh, int group, float sl2, float scale) {
#if T2_HAS_WGMMA
    typedef BwdSmem<D> L;
    constexpr int BK = L::BK, BQ = L::BQ, QB = L::QB, DQB = L::DQB, NT = 256, NW = 8;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = smem_raw + (((smem_u32(smem_raw) + 1023) & ~1023u) - smem_u32(smem_raw));
    unsigned char *sK = smem + L::k, *sV = smem + L::v, *sQ = smem + L::q, *sdO = smem + L::dout,
                  *sdS = smem + L::ds;
    float *sLse = (float *)(smem + L::lse), *sDi = (float *)(smem + L::di);
    int *sWmax = (int *)(smem + L::wmax);

    const int g = blockIdx.y;
    const int k0 = order[blockIdx.x] * BK; /* the keys most queries see first (t2_tree_blockmax) */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wgi = warp >> 2;
    const uint32_t kaddr = smem_u32(sK), vaddr = smem_u32(sV), qaddr = smem_u32(sQ), doaddr = smem_u32(sdO),
                   dsaddr = smem_u32(sdS);
    const uint32_t k_wg = kaddr + wgi * tile_bytes<D>(64), v_wg = vaddr + wgi * tile_bytes<D>(64);

    const uint32_t bar0 = smem_u32(smem + L::bar);
    if (threadIdx.x == 0)
        for (int i = 0; i < 2; ++i) tma::mbar_init(bar0 + 8 * i, 1 + 32); /* the TMA arrival + warp 0's lse/Di copies */
    load_tile<D, BK, NT>(sK, k + g * D, ks, k0, n);
    load_tile<D, BK, NT>(sV, v + g * D, vs, k0, n);
    cp_commit();

    KeyBlock<NW, BQ> kb; /* this block's keys and the query tiles that see them; init's barrier also
                            publishes the mbarriers */
    kb.init(sWmax, send, bmax, k0, n, warp, lane);
    /* warp 0: tile (hh, qt) into stage st — Q and dO by TMA (lane 0), lse and Di by cp.async (rows
     * past n read as 0: no key sees them) */
    auto load_q = [&](int hh, int qt, int st) {
        const int h = g * group + hh, q0 = qt * BQ;
        const uint32_t b = bar0 + 8 * st;
        for (int r = lane; r < BQ; r += 32) {
            const bool ok = q0 + r < n;
            const size_t i = (size_t)h * n + (ok ? q0 + r : 0);
            tma::cp_async4(smem_u32(sLse + st * BQ + r), lse + i, ok);
            tma::cp_async4(smem_u32(sDi + st * BQ + r), Di + i, ok);
        }
        tma::cp_async_arrive(b);
        if (lane == 0) {
            tma::mbar_arrive_tx(b, 2 * QB);
#pragma unroll
            for (int p = 0; p < D / 64; ++p) {
                tma::load_3d(qaddr + st * QB + p * BQ * 128, &tq, p * 64, h, q0, b);
                tma::load_3d(doaddr + st * QB + p * BQ * 128, &tdo, p * 64, h, q0, b);
            }
        }
    };

    float ak[D / 2], av[D / 2], s[32], dp[32], acc[D / 4];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) ak[i] = av[i] = 0.f;
    uint32_t pa[BQ / 16][4] = {}, da[BQ / 16][4] = {};

    int hh = kb.first_head(group), qt = kb.qstart;
    if (hh < group && warp == 0) load_q(hh, qt, 0);
    cp_wait_all(); /* this thread's K/V chunks */
    wg::fence_proxy_async();
    const uint32_t dqaddr = smem_u32(smem + L::dq);
    /* thread 0: the tile's dQ, staged in buffer b by both warpgroups, added into dq (D/32 boxes of 32
     * columns × BQ rows; rows past n are skipped) */
    auto flush_dq = [&](int b, int h, int q0) {
#pragma unroll
        for (int p = 0; p < D / 32; ++p) tma::reduce_add_2d(&tdq, h * D + p * 32, q0, dqaddr + b * DQB + p * BQ * 128);
        tma::bulk_commit();
    };
    int st = 0, prev_h = -1, prev_q0 = 0;
    uint32_t phases = 0; /* bit s: the parity the next wait on stage s's mbarrier waits for */
    while (hh < group) {
        int nhh, nqt;
        kb.after(hh, qt, nhh, nqt);
        tma::mbar_wait(bar0 + 8 * st, (phases >> st) & 1);
        phases ^= 1u << st;
        if (threadIdx.x == 0) tma::bulk_wait_read<0>(); /* the reduction of dQ buffer st (two tiles ago) read it */
        __syncthreads(); /* K/V (first tile) visible; every warpgroup is done with the other stage, with dSᵀ,
                            and has staged the previous tile's dQ */
        if (nhh < group && warp == 0) load_q(nhh, nqt, st ^ 1);
        if (threadIdx.x == 0 && prev_h >= 0) flush_dq(st ^ 1, prev_h, prev_q0);

        const int q0 = qt * BQ, q1 = q0 + BQ - 1;
        const uint32_t q_st = qaddr + st * QB, do_st = doaddr + st * QB;
        /* Sᵀ and dPᵀ for this warpgroup's 64 keys, issued unconditionally (a warpgroup that sees
         * nothing of the tile computes it and masks it to zero: see attention_sm90_fwd.cu on C7520) */
#pragma unroll
        for (int i = 0; i < 32; ++i) s[i] = dp[i] = 0.f; /* fresh values: last tile's are dead, not loop-carried */
        wg::fence_operand(s);
        wg::fence_operand(dp);
        wg::fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            wg::wgmma_ss_n64(s, wg::desc(k_wg + kk * 256, 128, D * 16),
                             wg::desc_sw128(q_st + (kk >> 2) * BQ * 128 + (kk & 3) * 32, 16, 1024), kk > 0);
        wg::commit();
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            wg::wgmma_ss_n64(dp, wg::desc(v_wg + kk * 256, 128, D * 16),
                             wg::desc_sw128(do_st + (kk >> 2) * BQ * 128 + (kk & 3) * 32, 16, 1024), kk > 0);
        wg::commit();
        wg::wait<1>(); /* Sᵀ: Pᵀ is computed while dPᵀ is still on the tensor cores */
        wg::fence_operand(s);

        /* Pᵀ and dSᵀ: this thread's rows are keys ja, jb; columns are queries */
        const bool wact = q0 <= kb.wmax && q1 >= kb.kw0;
        const bool full = kb.kw0 + 15 <= q0 && q1 <= kb.wmin && q1 < n;
        const float *cLse = sLse + st * BQ + (lane & 3) * 2, *cDi = sDi + st * BQ + (lane & 3) * 2;
        const int kr = (warp & 3) * 16 + (lane >> 2); /* the thread's first key row within its warpgroup */
        if (full) { /* the warp's keys see every query of the tile */
#pragma unroll
            for (int t = 0; t < BQ / 8; ++t) {
                const float2 l2 = *reinterpret_cast<const float2 *>(cLse + t * 8);
                s[4 * t] = fast_exp2(fmaf(s[4 * t], sl2, -l2.x));
                s[4 * t + 1] = fast_exp2(fmaf(s[4 * t + 1], sl2, -l2.y));
                s[4 * t + 2] = fast_exp2(fmaf(s[4 * t + 2], sl2, -l2.x));
                s[4 * t + 3] = fast_exp2(fmaf(s[4 * t + 3], sl2, -l2.y));
            }
        } else { /* the tree mask, as selects before the exponential (no per-element branches) */
#pragma unroll
            for (int t = 0; t < BQ / 8; ++t) {
                const float2 l2 = *reinterpret_cast<const float2 *>(cLse + t * 8);
                const int i = q0 + t * 8 + (lane & 3) * 2;
                const bool a0 = wact & (kb.ja <= i) & (i <= kb.enda), a1 = wact & (kb.ja <= i + 1) & (i + 1 <= kb.enda);
                const bool b0 = wact & (kb.jb <= i) & (i <= kb.endb), b1 = wact & (kb.jb <= i + 1) & (i + 1 <= kb.endb);
                s[4 * t] = fast_exp2(a0 ? fmaf(s[4 * t], sl2, -l2.x) : -INFINITY);
                s[4 * t + 1] = fast_exp2(a1 ? fmaf(s[4 * t + 1], sl2, -l2.y) : -INFINITY);
                s[4 * t + 2] = fast_exp2(b0 ? fmaf(s[4 * t + 2], sl2, -l2.x) : -INFINITY);
                s[4 * t + 3] = fast_exp2(b1 ? fmaf(s[4 * t + 3], sl2, -l2.y) : -INFINITY);
            }
        }
        wg::wait<0>(); /* dPᵀ */
        wg::fence_operand(dp);
#pragma unroll
        for (int t = 0; t < BQ / 8; ++t) {
            const float2 di = *reinterpret_cast<const float2 *>(cDi + t * 8);
            dp[4 * t] = s[4 * t] * (dp[4 * t] - di.x) * scale;
            dp[4 * t + 1] = s[4 * t + 1] * (dp[4 * t + 1] - di.y) * scale;
            dp[4 * t + 2] = s[4 * t + 2] * (dp[4 * t + 2] - di.x) * scale;
            dp[4 * t + 3] = s[4 * t + 3] * (dp[4 * t + 3] - di.y) * scale;
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
            /* dO and Q read N-major (swizzled): LBO = the 64-column panel stride, SBO = 8 queries */
            const uint64_t bo = wg::desc_sw128(do_st + kc * 2048, BQ * 128, 1024);
            const uint64_t bq = wg::desc_sw128(q_st + kc * 2048, BQ * 128, 1024);
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
        { /* this warpgroup's dQ half into buffer st, as the TMA reduction reads it: panel p of 32 columns
             is BQ rows of 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r mod 8) */
            const uint32_t buf = dqaddr + st * DQB;
#pragma unroll
            for (int t = 0; t < D / 16; ++t) {
                const int col = wgi * (D / 2) + t * 8 + (lane & 3) * 2; /* within the head */
                const int p = col >> 5, chunk = (col & 31) >> 2;
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int r = (warp & 3) * 16 + (lane >> 2) + hf * 8;
                    const uint32_t a = buf + p * BQ * 128 + r * 128 + ((chunk ^ (r & 7)) << 4) + (col & 2) * 4;
                    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(a), "f"(acc[4 * t + 2 * hf]),
                                 "f"(acc[4 * t + 2 * hf + 1])
                                 : "memory");
                }
            }
            wg::fence_proxy_async(); /* visible to the TMA reduction thread 0 issues after the next barrier */
        }
        prev_h = g * group + hh;
        prev_q0 = q0;
        wg::wait<0>(); /* dV, dK: pa, da, the stage and dSᵀ are free */
        wg::fence_operand(av);
        wg::fence_operand(ak);
        keep_live(pa);
        keep_live(da);
        hh = nhh;
        qt = nqt;
        st ^= 1;
    }

    if (prev_h >= 0) { /* the last tile's dQ */
        __syncthreads();
        if (threadIdx.x == 0) {
            flush_dq(st ^ 1, prev_h, prev_q0);
            tma::bulk_wait_all<0>();
        }
    }
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
    CUtensorMap tq, tdo, tdq;
    t2_status st = t2_tmap_rows(&tq, q, D, nh, n, qs, L::BQ);
    if (st.code == 0) st = t2_tmap_rows(&tdo, dout, D, nh, n, nh * D, L::BQ);
    if (st.code == 0) st = t2_tmap_f32(&tdq, dq, nh * D, n, L::BQ);
    if (st.code != 0) return st;
    const float scale = (float)(1.0 / sqrt((double)D));
    const float sl2 = (float)(1.4426950408889634 / sqrt((double)D));
    T2_CUDA(cudaMemsetAsync(dq, 0, (size_t)n * nh * D * sizeof(float), t2_stream));
    auto kern = sm90_bwd_kernel<D>;
    T2_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::bytes));
    const dim3 grid(ceil_div(n, L::BK), nkv);
    kern<<<grid, 256, L::bytes, t2_stream>>>(tq, tdo, tdq, (bf16 *)dk, dks, (bf16 *)dv, dvs, lse, Di, (const bf16 *)k,
                                             (const bf16 *)v, ks, vs, send, bmax,
                                             bmax + t2_work_order_at(n, 1), n, nh, nh / nkv, sl2, scale);
    T2_LAUNCHED("sm90_bwd_kernel");
    return t2_ok();
}

} // namespace
#endif

t2_status t2_attention_bwd_sm90(float *dq, void *dk, int dk_stride, void *dv, int dv_stride, const float *Di,
                                const void *dout, const float *lse, const void *q, const void *k, const void *v,
                                int q_stride, int k_stride, int v_stride, const int32_t *subtree_end,
                                const int32_t *blockmax, int n, int nh, int nkv, int d) {
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12000
    switch (d) {
    case 64:
        return bwd_d<64>(dq, dk, dk_stride, dv, dv_stride, Di, dout, lse, q, k, v, q_stride, k_stride, v_stride,
                         subtree_end, blockmax, n, nh, nkv);
    case 128:
        return bwd_d<128>(dq, dk, dk_stride, dv, dv_stride, Di, dout, lse, q, k, v, q_stride, k_stride, v_stride,
                          subtree_end, blockmax, n, nh, nkv);
    }
#endif
    return t2_fail(-1, "t2_attention_bwd_sm90(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
}
