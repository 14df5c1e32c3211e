/*
 * matmul.cu: the three GEMMs of a bias-free linear layer, bf16 operands with fp32 accumulation
 * through cuBLAS (llm.c: "cuBLAS for matmuls is a no-brainer default"), run by t2_gemm (gemm.cu:
 * cublasGemmEx, or cuBLASLt with per-shape tuned algorithms).
 *
 * Row-major [rows, cols] buffers are column-major [cols, rows] to cuBLAS, so y = x·wᵀ is computed
 * as yᵀ = w·xᵀ with w transposed (opA = T). Weight gradients are fp32 and accumulate (beta = 1):
 * they sum over micro-batches until the optimizer step, as llm.c's "+=" convention for params —
 * except the first write after a step, which overwrites (beta = 0), so the optimizer does not
 * have to zero 4 bytes per parameter (gpu/cuda/backend.go: gradsStale).
 * t2_linear_bwd_x_f32 is the input gradient with an fp32 result and a caller's beta, so the fused
 * LM head can sum its vocabulary tiles' contributions in fp32 and round to bf16 once.
 * defines: t2_linear_fwd, t2_linear_bwd_x, t2_linear_bwd_x_f32, t2_linear_bwd_w
 */
#include "common.cuh"

extern "C" t2_status t2_linear_fwd(void *ctx, void *y, const void *x, const void *w, int n, int in, int out) {
    return t2_gemm((t2_ctx *)ctx, 1, 0, out, n, in, w, in, x, in, 0.f, y, T2_OUT_BF16, out);
}

extern "C" t2_status t2_linear_bwd_x(void *ctx, void *dx, const void *dy, const void *w, int n, int in, int out) {
    return t2_gemm((t2_ctx *)ctx, 0, 0, in, n, out, w, in, dy, out, 0.f, dx, T2_OUT_BF16, in);
}

extern "C" t2_status t2_linear_bwd_x_f32(void *ctx, float *dx, const void *dy, const void *w, int n, int in, int out,
                                         float beta) {
    return t2_gemm((t2_ctx *)ctx, 0, 0, in, n, out, w, in, dy, out, beta, dx, T2_OUT_F32, in);
}

extern "C" t2_status t2_linear_bwd_w(void *ctx, float *dw, const void *dy, const void *x, int n, int in, int out,
                                     float beta) {
    return t2_gemm((t2_ctx *)ctx, 0, 1, in, out, n, x, in, dy, out, beta, dw, T2_OUT_F32, in);
}
