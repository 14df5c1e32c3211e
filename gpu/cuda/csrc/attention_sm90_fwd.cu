/*
 * attention_sm90_fwd.cu: the forward of the T2_ATT_HOPPER tree attention (attention.cu dispatches),
 * built the way FlashAttention-3 builds its forward on Hopper: a producer warpgroup that moves data
 * with the tensor memory accelerator (TMA) and two consumer warpgroups that only compute, meeting at
 * shared-memory mbarriers instead of block-wide barriers.
 *
 * Same mask, outputs and base-2 lse as attention_fa2.cu: key j is visible to query i iff
 * j ≤ i ≤ subtree_end[j]; tile skipping and the unmasked fast path use t2_tree_blockmax's per-64-key
 * maxima/minima of subtree_end, two blocks per 128-key tile.
 *   - A block owns BM = 128 query rows of one head. Warpgroup 0 is the producer: one warp issues
 *     the TMA copies of the Q tile and of each K and V tile (64 head-dim columns × 128 rows per copy,
 *     128-byte swizzled, rows past n zero-filled) and copies the tile's subtree ends with cp.async;
 *     it gives most of its registers to the consumers (setmaxnreg), which need ~200 each.
 *   - K and V tiles rotate through three stages each with full/empty mbarriers. A K stage is
 *     released once S = Q·Kᵀ and the mask have been read out of it, a V stage once P·V is done, so
 *     the loads run up to two tiles ahead of the math.
 *   - Consumer warpgroup c owns rows q0 + 64c …: S = Q·Kᵀ as wgmma m64n128 (both operands from
 *     shared memory), O += P·V as m64n{D} with P from registers (the S accumulator repacked in
 *     place), FlashAttention-3's intra-warpgroup overlap (S of this tile and P·V of the previous one
 *     issued together, the softmax waits only for S) and ping-pong scheduling between the two
 *     warpgroups (named barriers order their issues, so one warpgroup's softmax runs while the
 *     other's products occupy the tensor cores).
 *   - The mask costs nothing on tiles every row sees whole (t2_tree_blockmax's minima), and on the
 *     others it is one pass of selects before the softmax: written per element with && the
 *     compiler branched around each load of a subtree end, 64 branches per tile, which held this
 *     kernel at 250 TFLOP/s; so did walking the skipped tiles one global load at a time (a block of
 *     a late chain skips every tile of the chains before it), now 32 tiles per warp-wide ballot.
 * Every product is issued unconditionally: ptxas serializes every wgmma of a kernel in which one sits
 * under a data-dependent branch (its C7520 note) and must see each asynchronous stage opened and
 * closed within the loop body (C7515). So the first tile's "previous P·V" is P = 0 against its own
 * K stage (finite values: the product is exactly 0).
 *
 * Built for sm_90a only; elsewhere the kernel body is empty and t2_attention_sm90_available reports 0.
 * defines: t2_attention_sm90_available, t2_attention_fwd_sm90 (declared in attention_impl.h)
 */
#include "common.cuh"
#include "attention_impl.h"
#include "tile.cuh"
#include "tma.cuh"
#include "wgmma.cuh"
#include <math.h>
#include <stdint.h>

#if defined(CUDART_VERSION) && CUDART_VERSION >= 12000 /* TMA: CUDA 12 */
namespace {

constexpr int BM = 128; /* query rows per block: two consumer warpgroups of 64 */
static_assert(BM == 128, "t2_tree_blockmax's launch orders count 128-row blocks");
constexpr int BN = 128; /* keys per tile: two of t2_tree_blockmax's 64-key blocks */
constexpr int NT = 384; /* the producer warpgroup and two consumers */
constexpr int STAGES = 3; /* K and V tiles in flight each (3 · 64 KB + Q fits the 227 KB at D = 128) */
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232; /* 128·40 + 256·232 ≤ 65,536 */

/* Shared memory: Q, the K and the V stages (each [D/64 panels][rows][128 bytes], 128-byte swizzled,
 * so every tile starts 1024-byte aligned), the K stages' subtree ends and the mbarriers. */
template <int D> struct FwdSmem {
    static constexpr int TB = BN * D * 2; /* one K or V tile (and the Q tile: BM = BN) */
    static constexpr size_t q = 0;
    static constexpr size_t k = q + (size_t)BM * D * 2;
    static constexpr size_t v = k + (size_t)STAGES * TB;
    static constexpr size_t end = v + (size_t)STAGES * TB;
    static constexpr size_t bar = end + (size_t)STAGES * BN * 4;
    static constexpr size_t bytes = bar + (1 + 4 * STAGES) * 8 + 1024; /* + slack to align the base to 1024 */
};
/* mbarrier indices */
enum { Q_FULL = 0, K_FULL = 1, K_EMPTY = 1 + STAGES, V_FULL = 1 + 2 * STAGES, V_EMPTY = 1 + 3 * STAGES };

template <int D>
__global__ void __launch_bounds__(NT, 1)
    sm90_fwd_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                    const __grid_constant__ CUtensorMap tv, bf16 *out, float *lse, const int32_t *send,
                    const int32_t *bmax, const int32_t *bmin, const int32_t *order, int n, int nh, int group,
                    float sl2) {
#if T2_HAS_WGMMA
    typedef FwdSmem<D> L;
    constexpr int NP = D / 64, TB = L::TB;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023) & ~1023u;
    const unsigned char *smem = smem_raw + (base - raw);
    const uint32_t sQ = base + L::q, sK = base + L::k, sV = base + L::v, sEnd = base + L::end;
    auto bar = [&](int i) { return base + (uint32_t)L::bar + 8u * i; };

    const int qb = order[blockIdx.x]; /* the blocks with the most visible keys first (t2_tree_blockmax) */
    const int h = blockIdx.y, g = h / group;
    const int q0 = qb * BM;
    const int wgi = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int kend = min(q0 + BM - 1, n - 1) / BN, nb64 = (n + 63) / 64;
    /* the block's next key tile at or after kb that some row of the block can see (> kend: none);
     * the producer warp and every consumer warp walk the same sequence, each warp testing 32 tiles
     * per step (a block of a late chain skips every tile of the chains before it) */
    auto next_tile = [&](int kb) {
        for (; kb <= kend; kb += 32) {
            const int j = kb + lane, b = 2 * j;
            const bool seen = j <= kend && (bmax[b] >= q0 || (b + 1 < nb64 && bmax[b + 1] >= q0));
            const unsigned hit = __ballot_sync(0xffffffffu, seen);
            if (hit) return kb + __ffs(hit) - 1;
        }
        return kb;
    };

    if (threadIdx.x == 0) {
        tma::mbar_init(bar(Q_FULL), 1);
        for (int s = 0; s < STAGES; ++s) {
            tma::mbar_init(bar(K_FULL + s), 1 + 32); /* the TMA arrival and the 32 lanes' cp.async of the ends */
            tma::mbar_init(bar(K_EMPTY + s), 8);     /* each consumer warp */
            tma::mbar_init(bar(V_FULL + s), 1);
            tma::mbar_init(bar(V_EMPTY + s), 8);
        }
    }
    __syncthreads();

    if (wgi == 0) { /* producer */
        tma::regs_dec<PRODUCER_REGS>();
        if (warp != 0) return;
        if (lane == 0) {
            tma::mbar_arrive_tx(bar(Q_FULL), BM * D * 2);
            for (int p = 0; p < NP; ++p) tma::load_3d(sQ + p * BM * 128, &tq, p * 64, h, q0, bar(Q_FULL));
        }
        int s = 0;
        uint32_t free_parity = 1; /* the round before the first: complete, so the first waits pass */
        for (int kb = next_tile(0); kb <= kend; kb = next_tile(kb + 1)) {
            const int k0 = kb * BN;
            tma::mbar_wait(bar(K_EMPTY + s), free_parity);
            for (int i = lane; i < BN; i += 32) {
                const bool ok = k0 + i < n; /* keys past n: zero, and never visible (j > i) anyway */
                tma::cp_async4(sEnd + (uint32_t)(s * BN + i) * 4, send + (ok ? k0 + i : 0), ok);
            }
            tma::cp_async_arrive(bar(K_FULL + s));
            if (lane == 0) {
                tma::mbar_arrive_tx(bar(K_FULL + s), TB);
                for (int p = 0; p < NP; ++p)
                    tma::load_3d(sK + s * TB + p * BN * 128, &tk, p * 64, g, k0, bar(K_FULL + s));
            }
            tma::mbar_wait(bar(V_EMPTY + s), free_parity);
            if (lane == 0) {
                tma::mbar_arrive_tx(bar(V_FULL + s), TB);
                for (int p = 0; p < NP; ++p)
                    tma::load_3d(sV + s * TB + p * BN * 128, &tv, p * 64, g, k0, bar(V_FULL + s));
            }
            if (++s == STAGES) s = 0, free_parity ^= 1;
        }
        cp_wait_all();
        return;
    }

    /* consumer warpgroup c */
    tma::regs_inc<CONSUMER_REGS>();
    const int c = wgi - 1;
    const int r0 = q0 + c * 64, r1 = r0 + 63;       /* this warpgroup's rows */
    const int row_a = r0 + warp * 16 + (lane >> 2); /* the thread's rows: row_a and row_a + 8 */
    const uint32_t q_wg = sQ + c * 64 * 128;

    float s[BN / 2], o[D / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) s[i] = 0.f;
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2] = {1.f, 1.f};
    uint32_t pa[BN / 16][4] = {}; /* P of the previous tile, the A operand of its P·V */

    auto rescale = [&]() {
#pragma unroll
        for (int t = 0; t < D / 8; ++t) {
            o[4 * t] *= alpha[0];
            o[4 * t + 1] *= alpha[0];
            o[4 * t + 2] *= alpha[1];
            o[4 * t + 3] *= alpha[1];
        }
    };
    auto pv_product = [&](uint32_t v_addr) { /* V read N-major: LBO = panel stride, SBO = 8 keys */
#pragma unroll
        for (int kc = 0; kc < BN / 16; ++kc) {
            const uint64_t bd = wg::desc_sw128(v_addr + kc * 2048, BN * 128, 1024);
            if constexpr (D == 128)
                wg::wgmma_rs_n128_tb(o, pa[kc], bd);
            else
                wg::wgmma_rs_n64_tb(o, pa[kc], bd);
        }
    };

    if (c == 1) tma::bar_arrive(1, 256); /* warpgroup 0 issues first */
    tma::mbar_wait(bar(Q_FULL), 0);
    const int *ends = reinterpret_cast<const int *>(smem + L::end);
    int st = 0, pst = 0; /* stages of this tile and of the previous one, and their phase parities */
    uint32_t ph = 0, pph = 0;
    bool first = true;
    int kb = next_tile(0);
    while (kb <= kend) {
        tma::mbar_wait(bar(K_FULL + st), ph);
        if (!first) tma::mbar_wait(bar(V_FULL + pst), pph);
        rescale(); /* the previous tile's, before its P·V (and before S is issued: ptxas otherwise
                      waits for S first, C7517) */
        tma::bar_sync(1 + c, 256);
        wg::fence_operand(s);
        wg::fence_operand(o);
        keep_live(pa);
        wg::fence();
#pragma unroll
        for (int p = 0; p < NP; ++p)
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) /* K-major, swizzled: a k16 step is 32 bytes along the row */
                wg::wgmma_ss_n128(s, wg::desc_sw128(q_wg + p * BM * 128 + kk * 32, 16, 1024),
                                  wg::desc_sw128(sK + st * TB + p * BN * 128 + kk * 32, 16, 1024), p + kk > 0);
        wg::commit();
        pv_product(first ? sK + st * TB : sV + pst * TB);
        wg::commit();
        /* the tile walk's global loads run while the products do (each wait below is a compiler
         * barrier, so they are placed here explicitly) */
        const int nkb = next_tile(kb + 1);
        const int k0 = kb * BN, b = 2 * kb;
        const int mn = b + 1 < nb64 ? min(bmin[b], bmin[b + 1]) : -1;
        const bool full = k0 + BN - 1 <= r0 && r1 <= mn && r1 < n;
        if (c == 0 || nkb <= kend) tma::bar_arrive(2 - c, 256); /* the other warpgroup's turn */
        wg::wait<1>(); /* S (committed first); P·V keeps running */
        wg::fence_operand(s);

        if (!full) { /* the tree mask, once per tile for both rows (the same key columns) */
            const int *cEnd = ends + st * BN + (lane & 3) * 2;
#pragma unroll
            for (int u = 0; u < BN / 8; ++u) {
                const int2 e2 = *reinterpret_cast<const int2 *>(cEnd + u * 8);
                const int j = k0 + u * 8 + (lane & 3) * 2;
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int i = row_a + hf * 8;
                    float *x = s + 4 * u + 2 * hf;
                    x[0] = (j <= i) & (i <= e2.x) ? x[0] : -INFINITY;
                    x[1] = (j + 1 <= i) & (i <= e2.y) ? x[1] : -INFINITY;
                }
            }
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) { /* online softmax in the base-2 domain on the thread's two rows */
            float mx0 = -INFINITY, mx1 = -INFINITY; /* two chains: half the dependent latency */
#pragma unroll
            for (int u = 0; u < BN / 8; ++u) {
                mx0 = fmaxf(mx0, s[4 * u + 2 * hf]);
                mx1 = fmaxf(mx1, s[4 * u + 2 * hf + 1]);
            }
            const float mx = fmaxf(mx0, mx1);
            /* scores stay unscaled; the scale folds into one FFMA per element: x·sl2 − m */
            const float mnew = fmaxf(m[hf], shfl_max4(mx) * sl2);
            const float mref = mnew == -INFINITY ? 0.f : mnew; /* a row with nothing visible yet */
            alpha[hf] = fast_exp2(m[hf] - mref);
            m[hf] = mnew;
            float sum[2] = {0.f, 0.f};
#pragma unroll
            for (int u = 0; u < BN / 8; ++u) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float &x = s[4 * u + 2 * hf + e];
                    x = fast_exp2(fmaf(x, sl2, -mref));
                    sum[e] += x;
                }
            }
            l[hf] = l[hf] * alpha[hf] + (sum[0] + sum[1]);
        }
        __syncwarp();
        if (lane == 0) tma::mbar_arrive(bar(K_EMPTY + st)); /* S and the ends are read: the K stage is free */
        wg::wait<0>(); /* the previous tile's P·V: pa and its V stage are free */
        wg::fence_operand(o);
        keep_live(pa);
        if (!first && lane == 0) tma::mbar_arrive(bar(V_EMPTY + pst));
        pack_p(pa, s);
        pst = st;
        pph = ph;
        if (++st == STAGES) st = 0, ph ^= 1;
        first = false;
        kb = nkb;
    }
    /* the last tile's P·V (every block has one: its diagonal tile, j = i, is always visible) */
    tma::mbar_wait(bar(V_FULL + pst), pph);
    rescale();
    wg::fence_operand(o);
    keep_live(pa);
    wg::fence();
    pv_product(sV + pst * TB);
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
            for (int u = 0; u < D / 8; ++u)
                *reinterpret_cast<uint32_t *>(orow + u * 8) =
                    pack2(o[4 * u + 2 * hf] * inv, o[4 * u + 2 * hf + 1] * inv);
            if ((lane & 3) == 0) lse[(size_t)h * n + i] = m[hf] + log2f(sum);
        }
    }
#endif
}

template <int D>
t2_status fwd_d(void *out, float *lse, const void *q, const void *k, const void *v, int qs, int ks, int vs,
                const int32_t *send, const int32_t *bmax, int n, int nh, int nkv) {
    typedef FwdSmem<D> L;
    CUtensorMap tq, tk, tv;
    t2_status st = t2_tmap_rows(&tq, q, D, nh, n, qs, BM);
    if (st.code == 0) st = t2_tmap_rows(&tk, k, D, nkv, n, ks, BN);
    if (st.code == 0) st = t2_tmap_rows(&tv, v, D, nkv, n, vs, BN);
    if (st.code != 0) return st;
    auto kern = sm90_fwd_kernel<D>;
    T2_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)L::bytes));
    const dim3 grid(ceil_div(n, BM), nh);
    const float sl2 = (float)(1.4426950408889634 / sqrt((double)D));
    const int32_t *bmin = bmax + ceil_div(n, 64), *order = bmax + t2_work_order_at(n, 0);
    kern<<<grid, NT, L::bytes, t2_stream>>>(tq, tk, tv, (bf16 *)out, lse, send, bmax, bmin, order, n, nh, nh / nkv,
                                            sl2);
    T2_LAUNCHED("sm90_fwd_kernel");
    return t2_ok();
}

} // namespace
#endif

/* Writes 1 when this library's device code was built with wgmma (sm_90a) and runs on this device. */
__global__ void sm90_probe_kernel(int *ok) { *ok = T2_HAS_WGMMA; }

extern "C" t2_status t2_attention_sm90_available(int *available) {
    *available = 0;
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12000
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
#endif
    return t2_ok();
}

t2_status t2_attention_fwd_sm90(void *out, float *lse, const void *q, const void *k, const void *v, int q_stride,
                                int k_stride, int v_stride, const int32_t *subtree_end, const int32_t *blockmax,
                                int n, int nh, int nkv, int d) {
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12000
    switch (d) {
    case 64: return fwd_d<64>(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    case 128: return fwd_d<128>(out, lse, q, k, v, q_stride, k_stride, v_stride, subtree_end, blockmax, n, nh, nkv);
    }
#endif
    return t2_fail(-1, "t2_attention_fwd_sm90(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
}
