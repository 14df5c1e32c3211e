/*
 * matmul.cu: the three GEMMs of a bias-free linear layer, bf16 operands with fp32 accumulation
 * through cuBLAS (llm.c: "cuBLAS for matmuls is a no-brainer default").
 *
 * Row-major [rows, cols] buffers are column-major [cols, rows] to cuBLAS, so y = x·wᵀ is computed
 * as yᵀ = w·xᵀ with w transposed (opA = T). Weight gradients are fp32 and accumulate (beta = 1):
 * they sum over micro-batches until the optimizer step, as llm.c's "+=" convention for params.
 * t2_linear_bwd_x_f32 is the input gradient with an fp32 result and a caller's beta, so the fused
 * LM head can sum its vocabulary tiles' contributions in fp32 and round to bf16 once.
 * defines: t2_linear_fwd, t2_linear_bwd_x, t2_linear_bwd_x_f32, t2_linear_bwd_w
 */
#include "common.cuh"

extern "C" t2_status t2_linear_fwd(void *ctx, void *y, const void *x, const void *w, int n, int in, int out) {
    t2_ctx *c = (t2_ctx *)ctx;
    const float alpha = 1.f, beta = 0.f;
    T2_CUBLAS(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha, w, CUDA_R_16BF, in, x,
                           CUDA_R_16BF, in, &beta, y, CUDA_R_16BF, out, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT));
    return t2_ok();
}

extern "C" t2_status t2_linear_bwd_x(void *ctx, void *dx, const void *dy, const void *w, int n, int in, int out) {
    t2_ctx *c = (t2_ctx *)ctx;
    const float alpha = 1.f, beta = 0.f;
    T2_CUBLAS(cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &alpha, w, CUDA_R_16BF, in, dy,
                           CUDA_R_16BF, out, &beta, dx, CUDA_R_16BF, in, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT));
    return t2_ok();
}

extern "C" t2_status t2_linear_bwd_x_f32(void *ctx, float *dx, const void *dy, const void *w, int n, int in, int out,
                                         float beta) {
    t2_ctx *c = (t2_ctx *)ctx;
    const float alpha = 1.f;
    T2_CUBLAS(cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &alpha, w, CUDA_R_16BF, in, dy,
                           CUDA_R_16BF, out, &beta, dx, CUDA_R_32F, in, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT));
    return t2_ok();
}

extern "C" t2_status t2_linear_bwd_w(void *ctx, float *dw, const void *dy, const void *x, int n, int in, int out) {
    t2_ctx *c = (t2_ctx *)ctx;
    const float alpha = 1.f, beta = 1.f;
    T2_CUBLAS(cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &alpha, x, CUDA_R_16BF, in, dy,
                           CUDA_R_16BF, out, &beta, dw, CUDA_R_32F, in, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT));
    return t2_ok();
}
