/*
 * elementwise.cu: token embedding (forward gather, backward scatter-add), the SwiGLU activation
 * h = silu(gate)·up over the fused [gate | up] projection, and dtype conversions.
 *
 * SwiGLU rounds like transformers' bf16 Qwen3MLP: silu(gate) is a bf16 tensor, then the product is.
 * The embedding gradient is fp32 and uses atomicAdd, because a token id may repeat in a batch.
 * defines: t2_embedding_fwd, t2_embedding_bwd, t2_swiglu_fwd, t2_swiglu_bwd, t2_add_bf16, t2_f32_to_bf16, t2_bf16_to_f32
 */
#include "common.cuh"

__global__ void embedding_fwd_kernel(bf16 *out, const int32_t *tokens, const bf16 *table, int n, int c) {
    const int t = blockIdx.x;
    const bf16 *row = table + (size_t)tokens[t] * c;
    bf16 *o = out + (size_t)t * c;
    for (int i = threadIdx.x; i < c; i += blockDim.x) o[i] = row[i];
}

extern "C" t2_status t2_embedding_fwd(void *out, const int32_t *tokens, const void *table, int n, int c) {
    T2_REQUIRE(n > 0 && c > 0, "t2_embedding_fwd(shape)");
    embedding_fwd_kernel<<<n, 256>>>((bf16 *)out, tokens, (const bf16 *)table, n, c);
    T2_LAUNCHED("embedding_fwd_kernel");
    return t2_ok();
}

__global__ void embedding_bwd_kernel(float *dtable, const int32_t *tokens, const float *dout, int n, int c) {
    const int t = blockIdx.x;
    float *row = dtable + (size_t)tokens[t] * c;
    const float *g = dout + (size_t)t * c;
    for (int i = threadIdx.x; i < c; i += blockDim.x) atomicAdd(&row[i], g[i]);
}

extern "C" t2_status t2_embedding_bwd(float *dtable, const int32_t *tokens, const float *dout, int n, int c) {
    T2_REQUIRE(n > 0 && c > 0, "t2_embedding_bwd(shape)");
    embedding_bwd_kernel<<<n, 256>>>(dtable, tokens, dout, n, c);
    T2_LAUNCHED("embedding_bwd_kernel");
    return t2_ok();
}

__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + __expf(-x)); }

__global__ void swiglu_fwd_kernel(bf16 *h, const bf16 *gu, int n, int inter) {
    const size_t total = (size_t)n * inter;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
        const size_t t = idx / inter, j = idx - t * inter;
        const float g = __bfloat162float(gu[t * 2 * inter + j]);
        const float u = __bfloat162float(gu[t * 2 * inter + inter + j]);
        h[idx] = __float2bfloat16(rbf(g * sigmoidf(g)) * u);
    }
}

extern "C" t2_status t2_swiglu_fwd(void *h, const void *gu, int n, int i) {
    T2_REQUIRE(n > 0 && i > 0, "t2_swiglu_fwd(shape)");
    const size_t total = (size_t)n * i;
    int blocks = (int)((total + 255) / 256);
    if (blocks > 65536) blocks = 65536;
    swiglu_fwd_kernel<<<blocks, 256>>>((bf16 *)h, (const bf16 *)gu, n, i);
    T2_LAUNCHED("swiglu_fwd_kernel");
    return t2_ok();
}

__global__ void swiglu_bwd_kernel(bf16 *dgu, const bf16 *dh, const bf16 *gu, int n, int inter) {
    const size_t total = (size_t)n * inter;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
        const size_t t = idx / inter, j = idx - t * inter;
        const float g = __bfloat162float(gu[t * 2 * inter + j]);
        const float u = __bfloat162float(gu[t * 2 * inter + inter + j]);
        const float d = __bfloat162float(dh[idx]);
        const float sg = sigmoidf(g);
        const float s = rbf(g * sg);
        const float ds = rbf(d * u);
        dgu[t * 2 * inter + j] = __float2bfloat16(ds * sg * (1.f + g * (1.f - sg)));
        dgu[t * 2 * inter + inter + j] = __float2bfloat16(d * s);
    }
}

extern "C" t2_status t2_swiglu_bwd(void *dgu, const void *dh, const void *gu, int n, int i) {
    T2_REQUIRE(n > 0 && i > 0, "t2_swiglu_bwd(shape)");
    const size_t total = (size_t)n * i;
    int blocks = (int)((total + 255) / 256);
    if (blocks > 65536) blocks = 65536;
    swiglu_bwd_kernel<<<blocks, 256>>>((bf16 *)dgu, (const bf16 *)dh, (const bf16 *)gu, n, i);
    T2_LAUNCHED("swiglu_bwd_kernel");
    return t2_ok();
}

__global__ void f32_to_bf16_kernel(bf16 *dst, const float *src, size_t count) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16(src[i]);
}

__global__ void bf16_to_f32_kernel(float *dst, const bf16 *src, size_t count) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __bfloat162float(src[i]);
}

static int grid_for(size_t count) {
    size_t b = (count + 255) / 256;
    if (b > 65536) b = 65536;
    if (b == 0) b = 1;
    return (int)b;
}

__global__ void add_bf16_kernel(bf16 *out, const bf16 *a, const bf16 *b, size_t count) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

extern "C" t2_status t2_add_bf16(void *out, const void *a, const void *b, size_t count) {
    if (count == 0) return t2_ok();
    add_bf16_kernel<<<grid_for(count), 256>>>((bf16 *)out, (const bf16 *)a, (const bf16 *)b, count);
    T2_LAUNCHED("add_bf16_kernel");
    return t2_ok();
}

extern "C" t2_status t2_f32_to_bf16(void *dst, const float *src, size_t count) {
    if (count == 0) return t2_ok();
    f32_to_bf16_kernel<<<grid_for(count), 256>>>((bf16 *)dst, src, count);
    T2_LAUNCHED("f32_to_bf16_kernel");
    return t2_ok();
}

extern "C" t2_status t2_bf16_to_f32(float *dst, const void *src, size_t count) {
    if (count == 0) return t2_ok();
    bf16_to_f32_kernel<<<grid_for(count), 256>>>(dst, (const bf16 *)src, count);
    T2_LAUNCHED("bf16_to_f32_kernel");
    return t2_ok();
}
