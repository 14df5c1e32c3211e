/*
 * common.cuh: status helpers and check macros shared by every .cu file (llm.c's cudaCheck, but
 * returning a t2_status instead of exiting, so the Go caller gets an error with the call site).
 */
#pragma once
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include "t2cuda.h"

typedef __nv_bfloat16 bf16;

/* The stream every kernel launches on: the legacy default stream (0) unless a serving Decoder has
 * selected its own for its step (t2_use_stream), which CUDA graphs can capture. One process drives
 * one of Backend/Decoder at a time (the trainer and the sampler are separate processes). */
extern cudaStream_t t2_stream;

static inline t2_status t2_ok(void) {
    t2_status s = {0, 0, 0, 0, 0};
    return s;
}

static inline t2_status t2_fail(int code, const char *call, const char *file, int line, const char *msg) {
    t2_status s = {code == 0 ? -1 : code, call, file, line, msg};
    return s;
}

#define T2_CUDA(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return t2_fail((int)e_, #call, __FILE__, __LINE__, cudaGetErrorString(e_)); \
    } while (0)

#define T2_CUBLAS(call)                                                                            \
    do {                                                                                           \
        cublasStatus_t e_ = (call);                                                                \
        if (e_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return t2_fail((int)e_ + 10000, #call, __FILE__, __LINE__, cublasGetStatusString(e_)); \
    } while (0)

/* T2_LAUNCHED checks the launch itself (bad configuration, missing kernel image). */
#define T2_LAUNCHED(name)                                                                          \
    do {                                                                                           \
        cudaError_t e_ = cudaGetLastError();                                                       \
        if (e_ != cudaSuccess) return t2_fail((int)e_, name, __FILE__, __LINE__, cudaGetErrorString(e_)); \
    } while (0)

#define T2_REQUIRE(cond, what)                                                                     \
    do {                                                                                           \
        if (!(cond)) return t2_fail(-1, what, __FILE__, __LINE__, "invalid argument");            \
    } while (0)

struct t2_gemm_state; /* gemm.cu: cuBLASLt handle and tuned plans (T2_GEMM_TUNED only) */

/* Context owned by one Backend: the cuBLAS handle, its workspace, timing events, and the tuned
 * GEMM plans when t2_set_gemm(T2_GEMM_TUNED) asked for them (NULL: cublasGemmEx). */
struct t2_ctx {
    int device;
    cublasHandle_t blas;
    void *workspace;
    size_t workspace_bytes;
    cudaEvent_t ev_start, ev_stop;
    t2_gemm_state *gemm;
};

/* t2_gemm (gemm.cu): C = op(A)·op(B) + beta·C, column-major as cuBLAS sees it, bf16 A and B, fp32
 * accumulation, C bf16 (T2_OUT_BF16) or fp32 (T2_OUT_F32); op 1 transposes. Every GEMM of the
 * library goes through it. t2_gemm_release frees the tuned plans (t2_destroy). */
enum { T2_OUT_BF16 = 0, T2_OUT_F32 = 1 };
t2_status t2_gemm(t2_ctx *c, int opa, int opb, int m, int n, int k, const void *a, int lda, const void *b, int ldb,
                  float beta, void *out, int ctype, int ldc);
void t2_gemm_release(t2_ctx *c);

static inline int ceil_div(long a, long b) { return (int)((a + b - 1) / b); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* block_sum: every thread gets the block-wide sum; blockDim.x must be a multiple of 32, ≤ 1024.
 * shared must hold 32 floats; the trailing barrier makes back-to-back calls safe. */
__device__ __forceinline__ float block_sum(float v, float *shared) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    float r = lane < nw ? shared[lane] : 0.f;
    r = warp_sum(r);
    __syncthreads();
    return r;
}
/* round-trip through bf16, as PyTorch does when a bf16 tensor op materializes its result */
__device__ __forceinline__ float rbf(float x) { return __bfloat162float(__float2bfloat16(x)); }
