/*
 * tile.cuh: what the attention kernels (attention_fa2.cu, attention_sm90_*.cu) share to stage tiles in
 * shared memory, to reduce across the 4 lanes that hold one row of an mma/wgmma fragment, and to add
 * dQ partials into global memory.
 */
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "vec.cuh"

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16-byte asynchronous global→shared copy; when !valid nothing is read and the 16 bytes are zeroed */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
    const int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* 2^x as one MUFU.EX2 (ex2.approx.ftz: ≤ 2 ulp, results below 2^-126 flushed to 0, 2^-inf = 0).
 * exp2f without fast-math wraps the same instruction in a denormal-range fix-up (a compare and two
 * multiplies per element); dropping it made the Hopper forward 7% faster. */
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float shfl_max4(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float shfl_sum4(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* The bf16 A fragments of the next product (NK chunks of 16 columns) from an fp32 accumulator s in
 * the mma/wgmma C layout: a score tile becomes P, the register operand of P·V. */
template <int NK> __device__ __forceinline__ void pack_p(uint32_t (&pa)[NK][4], const float *s) {
#pragma unroll
    for (int kc = 0; kc < NK; ++kc) {
        pa[kc][0] = pack2(s[8 * kc + 0], s[8 * kc + 1]);
        pa[kc][1] = pack2(s[8 * kc + 2], s[8 * kc + 3]);
        pa[kc][2] = pack2(s[8 * kc + 4], s[8 * kc + 5]);
        pa[kc][3] = pack2(s[8 * kc + 6], s[8 * kc + 7]);
    }
}

/* wgmma reads its register A operand asynchronously: the registers must keep their values until the
 * wait that retires the product. keep_live makes the compiler treat pa as read and rewritten at the
 * wait, so it neither reuses those registers earlier nor moves the next packing above the wait. */
template <int NK> __device__ __forceinline__ void keep_live(uint32_t (&pa)[NK][4]) {
#pragma unroll
    for (int kc = 0; kc < NK; ++kc)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(pa[kc][e])::"memory");
}

/* p[0..3] += v atomically (p 16-byte aligned): one vector reduction on Hopper with CUDA ≥ 13, whose
 * headers declare atomicAdd(float4 *, float4) for sm_90; four scalar ones otherwise. */
__device__ __forceinline__ void red_add4(float *p, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDACC_VER_MAJOR__ >= 13
    atomicAdd(reinterpret_cast<float4 *>(p), v);
#else
    atomicAdd(p, v.x);
    atomicAdd(p + 1, v.y);
    atomicAdd(p + 2, v.z);
    atomicAdd(p + 3, v.w);
#endif
}

/* Adds a 16-row C fragment (the mma.m16n8 / wgmma accumulator layout: this lane holds rows lane/4
 * and lane/4 + 8, columns 8t + 2·(lane%4) + {0, 1} in c[4t…4t+3]) of NT8 8-column tiles into fp32
 * rows base + r·ld (rows r ≥ rows skipped) with 16-byte atomics: lanes l and l^1 trade one pair, so
 * the even lane adds 4 columns of row r and the odd lane 4 of row r + 8, one vector atomic each
 * instead of four scalar ones. The exchanges come first and the atomics after, under one branch and
 * from one row address (immediate offsets): a branch per atomic made the compiler recompute the
 * 64-bit address for each (fewer instructions; no faster on the H200 — the atomics themselves are
 * the cost, which is why the Hopper backward adds dQ with TMA reductions instead). */
template <int NT8>
__device__ __forceinline__ void red_add_frag(float *base, size_t ld, int rows, const float *c, int lane) {
    const bool odd = lane & 1;
    const int r = (lane >> 2) + (odd ? 8 : 0);
    float4 v[NT8];
#pragma unroll
    for (int t = 0; t < NT8; ++t) {
        const float x = __shfl_xor_sync(0xffffffffu, odd ? c[4 * t] : c[4 * t + 2], 1);
        const float y = __shfl_xor_sync(0xffffffffu, odd ? c[4 * t + 1] : c[4 * t + 3], 1);
        v[t] = odd ? make_float4(x, y, c[4 * t + 2], c[4 * t + 3]) : make_float4(c[4 * t], c[4 * t + 1], x, y);
    }
    if (r < rows) {
        float *row = base + (size_t)r * ld + (lane & 2) * 2;
#pragma unroll
        for (int t = 0; t < NT8; ++t) red_add4(row + t * 8, v[t]);
    }
}

/* KeyBlock: the tree-mask bookkeeping of a backward block that owns NW·16 keys from k0, shared by
 * the FA2 and Hopper dK/dV kernels. Warp w owns keys k0 + 16w …; this lane's rows are ja = k0 + 16w
 * + lane/4 and jb = ja + 8 (the mma/wgmma accumulator rows), with subtree ends enda, endb (−1 past
 * n). The warp's keys are seen by no query after wmax, and every one of them by every query up to
 * wmin (the unmasked fast path). The BQ-query tiles the block visits are qstart, next(qstart), …
 * up to qlast: those where some key of the block sees some query, found from the warps' extents
 * (sw, in shared memory) and the 64-key block maxima of subtree_end (t2_tree_blockmax). init runs
 * one __syncthreads, which publishes sw. */
template <int NW, int BQ> struct KeyBlock {
    int k0, kw0, ja, jb, enda, endb, wmax, wmin, qlast, qstart;
    const int *sw;

    __device__ __forceinline__ void init(int *sw_, const int32_t *send, const int32_t *bmax, int k0_, int n, int warp,
                                         int lane) {
        constexpr int BK = 16 * NW, BB = 64; /* t2_tree_blockmax's blocks */
        k0 = k0_;
        kw0 = k0 + warp * 16;
        sw = sw_;
        ja = kw0 + (lane >> 2);
        jb = ja + 8;
        enda = ja < n ? send[ja] : -1;
        endb = jb < n ? send[jb] : -1;
        wmax = max(enda, endb);
        wmin = min(ja < n ? enda : INT32_MAX, jb < n ? endb : INT32_MAX);
        for (int o = 16; o > 0; o >>= 1) {
            wmax = max(wmax, __shfl_xor_sync(0xffffffffu, wmax, o));
            wmin = min(wmin, __shfl_xor_sync(0xffffffffu, wmin, o));
        }
        if (lane == 0) sw_[warp] = wmax;
        int last = -1; /* the last query any key of the block is visible to */
        for (int b = k0 / BB; b < min((n + BB - 1) / BB, (k0 + BK) / BB); ++b) last = max(last, bmax[b]);
        last = min(last, n - 1);
        __syncthreads(); /* sw */
        qlast = last / BQ;
        const int qfirst = k0 / BQ;
        qstart = active(qfirst) ? qfirst : next(qfirst);
    }
    /* some key of the block sees some query of tile qt */
    __device__ __forceinline__ bool active(int qt) const {
        const int a = qt * BQ, z = a + BQ - 1;
#pragma unroll
        for (int w = 0; w < NW; ++w)
            if (a <= sw[w] && z >= k0 + 16 * w) return true;
        return false;
    }
    /* the next tile after qt the block visits (> qlast: none) */
    __device__ __forceinline__ int next(int qt) const {
        ++qt;
        while (qt <= qlast && !active(qt)) ++qt;
        return qt;
    }
    /* The block visits (query head hh of the GQA group, tile qt) pairs head by head: the first is
     * (first_head(group), qstart), hh == group meaning nothing (a block of padding keys) or done;
     * after gives the pair that follows (hh, qt). */
    __device__ __forceinline__ int first_head(int group) const { return qstart > qlast ? group : 0; }
    __device__ __forceinline__ void after(int hh, int qt, int &nhh, int &nqt) const {
        nhh = hh;
        nqt = next(qt);
        if (nqt > qlast) {
            ++nhh;
            nqt = qstart;
        }
    }
};
