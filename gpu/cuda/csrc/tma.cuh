/*
 * tma.cuh: Hopper's asynchronous data movement for warp-specialized kernels, as inline-PTX wrappers
 * (no CUTLASS dependency): shared-memory mbarriers with transaction counts, TMA tensor copies
 * (cp.async.bulk.tensor) that complete on an mbarrier, TMA reductions into global memory, cp.async
 * copies that arrive on an mbarrier, and the register reallocation (setmaxnreg) that lets a
 * producer warpgroup hand its registers to the consumers. Device code only where T2_HAS_WGMMA
 * (sm_90a); elsewhere the bodies are empty and the host never launches a kernel that calls them
 * (t2_attention_sm90_available reports 0).
 *
 * mbarrier phases: a barrier starts in phase 0; it completes a phase when its pending arrival count
 * (the init count) reaches zero and every expected transaction byte has landed, and then starts the
 * next. wait(bar, parity) returns once the phase with that parity has completed, so a consumer of
 * pipeline slot s waits parity (use >> log2(slots)) & 1, and the producer refilling it waits the
 * opposite parity on the slot's "empty" barrier (which returns at once on the first round).
 *
 * Host side: t2_tmap_rows encodes the tensor map of a [rows][heads][D] bf16 activation (any row
 * stride), copied 64 head-dim columns (128 bytes, one 128-byte swizzle span) × box_rows rows at a
 * time into the 128-byte-swizzled layout wgmma's descriptors read (wgmma.cuh: desc_sw128);
 * t2_tmap_f32 that of an fp32 matrix that TMA reductions add into.
 */
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>
#include "wgmma.cuh"

namespace tma {

#if T2_HAS_WGMMA
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* One arrival that also announces bytes more transaction bytes for the current phase. */
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n.reg .pred p;\nT2_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra T2_WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* The executing thread's earlier cp.async copies arrive on bar when they land (counted against the
 * barrier's init count: .noinc). */
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/* 4-byte asynchronous global→shared copy; when !valid nothing is read and the 4 bytes are zeroed. */
__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0)
                 : "memory");
}
/* TMA: the box at coordinates (c0, c1, c2) of the tensor map at generic address map into shared
 * memory at dst; its bytes complete on bar. Rows outside the tensor land as zeros. */
__device__ __forceinline__ void load_3d(uint32_t dst, const void *map, int c0, int c1, int c2, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}
/* TMA reduction: adds the box at shared-memory address src into the tensor map's box at (c0, c1)
 * (fp32 .add for an fp32 map), one bulk async-group per commit; elements outside the tensor are
 * skipped. wait_read<N> returns once at most N groups still read shared memory (their source may
 * then be overwritten), wait_all<0> once they have completed. */
__device__ __forceinline__ void reduce_add_2d(const void *map, int c0, int c1, uint32_t src) {
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(c0), "r"(c1), "r"(src)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void bulk_wait_all() {
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
/* Register reallocation between the warpgroups of a block (all 4 warps of a warpgroup run it). */
template <int N> __device__ __forceinline__ void regs_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void regs_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
/* Named barriers 1…15 (0 is __syncthreads) among count threads: sync waits, arrive does not. */
__device__ __forceinline__ void bar_sync(int id, int count) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int count) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
#else
__device__ __forceinline__ void mbar_init(uint32_t, uint32_t) {}
__device__ __forceinline__ void mbar_arrive_tx(uint32_t, uint32_t) {}
__device__ __forceinline__ void mbar_arrive(uint32_t) {}
__device__ __forceinline__ void mbar_wait(uint32_t, uint32_t) {}
__device__ __forceinline__ void cp_async_arrive(uint32_t) {}
__device__ __forceinline__ void cp_async4(uint32_t, const void *, bool) {}
__device__ __forceinline__ void load_3d(uint32_t, const void *, int, int, int, uint32_t) {}
__device__ __forceinline__ void reduce_add_2d(const void *, int, int, uint32_t) {}
__device__ __forceinline__ void bulk_commit() {}
template <int N> __device__ __forceinline__ void bulk_wait_read() {}
template <int N> __device__ __forceinline__ void bulk_wait_all() {}
template <int N> __device__ __forceinline__ void regs_dec() {}
template <int N> __device__ __forceinline__ void regs_inc() {}
__device__ __forceinline__ void bar_sync(int, int) {}
__device__ __forceinline__ void bar_arrive(int, int) {}
#endif

} // namespace tma

/* ---- host: tensor maps ------------------------------------------------------------------------ */
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12000
#include <cuda.h>         /* CUtensorMap and its enums (types only: the library does not link libcuda) */
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled */
#include "common.cuh"

/* The driver's cuTensorMapEncodeTiled, found through the runtime (cudaGetDriverEntryPoint), so the
 * library needs no -lcuda. */
static inline t2_status t2_tmap_encoder(PFN_cuTensorMapEncodeTiled_v12000 *out) {
    static PFN_cuTensorMapEncodeTiled_v12000 encode = NULL; /* the same pointer for every caller */
    if (encode == NULL) {
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
        void *fn = NULL;
#if CUDART_VERSION >= 12050
        T2_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
#else
        T2_CUDA(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found));
#endif
        if (found != cudaDriverEntryPointSuccess || fn == NULL)
            return t2_fail(-1, "cudaGetDriverEntryPoint(cuTensorMapEncodeTiled)", __FILE__, __LINE__,
                           "the CUDA driver does not provide cuTensorMapEncodeTiled (TMA needs a CUDA 12 driver)");
        encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    }
    *out = encode;
    return t2_ok();
}

static inline t2_status t2_tmap_check(CUresult r) {
    if (r != CUDA_SUCCESS)
        return t2_fail((int)r, "cuTensorMapEncodeTiled", __FILE__, __LINE__,
                       "cannot describe the tensor to TMA (base address and row stride must be 16-byte multiples)");
    return t2_ok();
}

/* The map of a bf16 activation laid out [rows][heads][d] (row_stride elements between rows, heads
 * packed at d elements), read as boxes of 64 head-dim columns × 1 head × box_rows rows with 128-byte
 * swizzling: box (c0, head, row0) lands as box_rows rows of 128 bytes, the layout desc_sw128 reads.
 * Rows ≥ rows land as zeros. */
static inline t2_status t2_tmap_rows(CUtensorMap *map, const void *base, int d, int heads, int rows, int row_stride,
                                     int box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    const t2_status st = t2_tmap_encoder(&encode);
    if (st.code != 0) return st;
    const cuuint64_t dims[3] = {(cuuint64_t)d, (cuuint64_t)heads, (cuuint64_t)rows};
    const cuuint64_t strides[2] = {(cuuint64_t)d * 2, (cuuint64_t)row_stride * 2}; /* bytes, dims 1 and 2 */
    const cuuint32_t box[3] = {64, 1, (cuuint32_t)box_rows};
    const cuuint32_t step[3] = {1, 1, 1};
    return t2_tmap_check(encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void *>(base), dims, strides, box,
                                step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

/* The map of a dense fp32 matrix [rows][cols], boxes of 32 columns (128 bytes, 128-byte swizzled) ×
 * box_rows rows: the target of reduce_add_2d. Rows ≥ rows are skipped. */
static inline t2_status t2_tmap_f32(CUtensorMap *map, float *base, int cols, int rows, int box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 encode;
    const t2_status st = t2_tmap_encoder(&encode);
    if (st.code != 0) return st;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * 4};
    const cuuint32_t box[2] = {32, (cuuint32_t)box_rows};
    const cuuint32_t step[2] = {1, 1};
    return t2_tmap_check(encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, step,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}
#endif
