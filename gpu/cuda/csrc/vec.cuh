/*
 * vec.cuh: what the memory-bound kernels (norm.cu, elementwise.cu, logprob.cu, adamw.cu) share to
 * run at DRAM bandwidth: 16-byte vectors of 8 bf16 and 8-byte ones of 4 (element 0 in the low half
 * of .x; packing rounds to nearest even, as __float2bfloat16 does), the alignment test that picks
 * the vector paths, and the size of a resident grid for grid-stride kernels.
 */
#pragma once
#include "common.cuh"
#include <stdint.h>

__device__ __forceinline__ void unpack8(const uint4 &u, float f[8]) {
    const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        f[2 * k] = __uint_as_float(w[k] << 16);
        f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
}
/* two floats as one word of two bf16 */
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned *>(&h);
}
/* rbf2 rounds two values at once, with the same bits as two rbf: one packed conversion
 * (F2FP.BF16.F32.PACK_AB) and two integer ops instead of two F2F.BF16.F32, which issue on the
 * narrow conversion pipe. The q/k norm + RoPE forward rounds four times per element; with rbf2
 * it took 7% less time on an H100 (2.35–2.42 → 2.19 ms per step), its backward 3% less; the
 * RMSNorm kernels, which round less per byte moved, did not change with it and keep rbf. */
__device__ __forceinline__ void rbf2(float &a, float &b) {
    const unsigned u = pack2(a, b);
    a = __uint_as_float(u << 16);
    b = __uint_as_float(u & 0xffff0000u);
}
__device__ __forceinline__ uint4 pack8(const float f[8]) {
    return make_uint4(pack2(f[0], f[1]), pack2(f[2], f[3]), pack2(f[4], f[5]), pack2(f[6], f[7]));
}

/* 8-byte vectors of 4 bf16, for kernels that pair bf16 with fp32 tensors: a warp's 8-byte bf16
 * accesses and its 16-byte fp32 ones (float4) then cover whole 32-byte sectors per instruction. */
__device__ __forceinline__ void unpack4(const uint2 &u, float f[4]) {
    f[0] = __uint_as_float(u.x << 16);
    f[1] = __uint_as_float(u.x & 0xffff0000u);
    f[2] = __uint_as_float(u.y << 16);
    f[3] = __uint_as_float(u.y & 0xffff0000u);
}
__device__ __forceinline__ uint2 pack4(const float f[4]) { return make_uint2(pack2(f[0], f[1]), pack2(f[2], f[3])); }

/* aligned16: whether a 16-byte vector access at p is legal (NULL counts as aligned). */
static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* resident_blocks: how many blocks of kernel (threads per block, smem dynamic bytes) the device
 * runs at once: the grid of a grid-stride kernel that keeps per-thread state (weights, gradient
 * partials) over as many rows as possible, with no tail wave. */
template <typename Kernel>
static cudaError_t resident_blocks(Kernel kernel, int threads, size_t smem, int *blocks) {
    int dev = 0, sms = 0, per = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel, threads, smem);
    *blocks = sms * (per > 0 ? per : 1);
    return e;
}
