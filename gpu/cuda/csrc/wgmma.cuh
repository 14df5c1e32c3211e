/*
 * wgmma.cuh: Hopper (sm_90a) warpgroup matrix multiply-accumulate, the instructions FlashAttention-3
 * and CUTLASS 3 build on, as small inline-PTX wrappers (no CUTLASS dependency).
 *
 * A warpgroup is 4 consecutive warps (128 threads) that issue one wgmma together. Each wgmma is
 * asynchronous: fence() before the first one that reads registers written by ordinary code,
 * commit() to close a group, wait<N>() until at most N groups are still running, and
 * fence_operand() on every accumulator register after a wait, so the compiler does not move reads
 * of the accumulators above the wait (CUTLASS's warpgroup_fence_operand).
 *
 * Shared-memory operands are described by 64-bit matrix descriptors, in one of two of the PTX ISA's
 * canonical layouts: the no-swizzle ("interleaved") one (desc), whose unit is the core matrix, 8
 * rows of 16 contiguous bytes (8 bf16) stored as one contiguous 128-byte block, written here by
 * cp.async; and the 128-byte swizzle (desc_sw128, below), the one TMA writes.
 *   K-major  ((8,m),(8,2k)):((8,SBO),(1,LBO)) in bf16 elements: LBO = bytes between core
 *            matrices adjacent along K, SBO = bytes between core matrices adjacent along M/N;
 *   MN-major ((8,1,m),(8,k)):((1,8,SBO),(8,LBO)): 8 consecutive M/N elements are contiguous, the
 *            8 rows of a core matrix are 8 consecutive K; SBO = bytes between core matrices along
 *            M/N, LBO = bytes between core matrices along K.
 * Accumulator fragments (m64nN, fp32): warp w of the warpgroup holds rows 16w + lane/4 and
 * 16w + lane/4 + 8; register 4j + 2·half + e is row (lane/4 + 8·half), column 8j + 2·(lane%4) + e —
 * per 8 columns the same as mma.sync.m16n8's C fragment, so a score tile repacks into the A
 * fragment of the next product exactly as in the FA2 kernels.
 *
 * The asm operand lists are long; they follow one pattern (d registers, then the A operand, the B
 * descriptor and the scale-d predicate).
 */
#pragma once
#include <stdint.h>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define T2_HAS_WGMMA 1
#else
#define T2_HAS_WGMMA 0
#endif

namespace wg {

/* desc is the matrix descriptor of a no-swizzle tile at shared-memory byte address addr: bits 0–13
 * address>>4, 16–29 LBO>>4, 32–45 SBO>>4, base offset 0, layout type 0 (no swizzle). */
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32);
}

/* desc_sw128 is the matrix descriptor of a tile in the 128-byte-swizzle layout (layout type 1,
 * bits 62–63), the one TMA writes with CU_TENSOR_MAP_SWIZZLE_128B: rows of 128 bytes, the 16-byte
 * chunk c of row r stored at chunk c ^ (r mod 8), 8-row atoms of 1024 bytes that must start
 * 1024-byte aligned. In CUTLASS's terms (T = 8 bf16, units of 16 bytes):
 *   K-major  ((8,m),(T,2)):((8T,SBO),(1,T)): SBO = bytes between 8-row atoms along M/N, LBO unused;
 *            a k16 step within the 64-element row is +32 bytes on the start address;
 *   MN-major ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): 64 M/N elements per 128-byte row, LBO = bytes
 *            between 64-element column panels, SBO = bytes between 8-row atoms along K —
 *            note LBO and SBO swap roles against the no-swizzle MN-major layout. */
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return desc(addr, lbo, sbo) | (1ull << 62);
}

#if T2_HAS_WGMMA
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Generic-proxy writes to shared memory (st.shared, cp.async) become visible to wgmma, which reads
 * through the async proxy; each writing thread runs it before the barrier that publishes the tile. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#else
__device__ __forceinline__ void fence() {}
__device__ __forceinline__ void commit() {}
template <int N> __device__ __forceinline__ void wait() {}
__device__ __forceinline__ void fence_proxy_async() {}
#endif

template <int R> __device__ __forceinline__ void fence_operand(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#if T2_HAS_WGMMA
/* The "+f" operands of a warpgroup accumulator fragment of 16, 32 or 64 floats, in register order
 * (inline asm wants every operand spelled out; the wrappers below share these lists). */
#define T2_WG_ACC8(d, o)                                                                            \
    "+f"(d[(o) + 0]), "+f"(d[(o) + 1]), "+f"(d[(o) + 2]), "+f"(d[(o) + 3]), "+f"(d[(o) + 4]),   \
        "+f"(d[(o) + 5]), "+f"(d[(o) + 6]), "+f"(d[(o) + 7])
#define T2_WG_ACC16(d) T2_WG_ACC8(d, 0), T2_WG_ACC8(d, 8)
#define T2_WG_ACC32(d) T2_WG_ACC16(d), T2_WG_ACC8(d, 16), T2_WG_ACC8(d, 24)
#define T2_WG_ACC64(d) T2_WG_ACC32(d), T2_WG_ACC8(d, 32), T2_WG_ACC8(d, 40), T2_WG_ACC8(d, 48), T2_WG_ACC8(d, 56)

/* d (+)= A·B, m64n64k16: A [64 × 16] and B [64 × 16] both K-major in shared memory (descriptors);
 * accumulate = 0 overwrites d. */
__device__ __forceinline__ void wgmma_ss_n64(float d[32], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : T2_WG_ACC32(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* d (+)= A·B, m64n128k16: A [64 × 16] and B [128 × 16] both K-major in shared memory
 * (descriptors); accumulate = 0 overwrites d. */
__device__ __forceinline__ void wgmma_ss_n128(float d[64], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : T2_WG_ACC64(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* d += A·B, m64n64k16: A [64 × 16] from registers (the mma.m16n8k16 A fragment of each warp's 16
 * rows), B [16 × 64] in shared memory stored N-major (transposed, imm-trans-b = 1). */
__device__ __forceinline__ void wgmma_rs_n64_tb(float d[32], const uint32_t a[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : T2_WG_ACC32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* d += A·B, m64n128k16: A [64 × 16] from registers (the mma.m16n8k16 A fragment of each warp's 16
 * rows), B [16 × 128] in shared memory stored N-major (transposed, imm-trans-b = 1). */
__device__ __forceinline__ void wgmma_rs_n128_tb(float d[64], const uint32_t a[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : T2_WG_ACC64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* d (+)= A·B, m64n64k16, both operands in shared memory stored M/N-major (transposed:
 * imm-trans-a = imm-trans-b = 1); accumulate = 0 overwrites d. */
__device__ __forceinline__ void wgmma_ss_n64_tt(float d[32], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n}\n"
                 : T2_WG_ACC32(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* d (+)= A·B, m64n32k16, both operands in shared memory stored M/N-major (transposed:
 * imm-trans-a = imm-trans-b = 1); accumulate = 0 overwrites d. */
__device__ __forceinline__ void wgmma_ss_n32_tt(float d[16], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 1, 1;\n}\n"
                 : T2_WG_ACC16(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}
#else
/* Built for another architecture: never called (the host side checks t2_attention_sm90_available). */
__device__ __forceinline__ void wgmma_ss_n64(float *, uint64_t, uint64_t, int) {}
__device__ __forceinline__ void wgmma_ss_n128(float *, uint64_t, uint64_t, int) {}
__device__ __forceinline__ void wgmma_rs_n64_tb(float *, const uint32_t *, uint64_t) {}
__device__ __forceinline__ void wgmma_rs_n128_tb(float *, const uint32_t *, uint64_t) {}
__device__ __forceinline__ void wgmma_ss_n64_tt(float *, uint64_t, uint64_t, int) {}
__device__ __forceinline__ void wgmma_ss_n32_tt(float *, uint64_t, uint64_t, int) {}
#endif

} // namespace wg
