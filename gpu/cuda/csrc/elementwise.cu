/*
 * elementwise.cu: token embedding (forward gather, backward scatter-add), the SwiGLU activation
 * h = silu(gate)·up over the fused [gate | up] projection, and dtype conversions.
 *
 * SwiGLU rounds like transformers' bf16 Qwen3MLP: silu(gate) is a bf16 tensor, then the product is.
 * The embedding gradient is fp32 and uses atomicAdd, because a token id may repeat in a batch.
 * SwiGLU and the residual add only move memory: they use 16-byte accesses (8 bf16) when the shapes
 * and pointers allow, scalar ones otherwise, with the same arithmetic and roundings either way.
 * defines: t2_embedding_fwd, t2_embedding_bwd, t2_swiglu_fwd, t2_swiglu_bwd, t2_add_bf16, t2_f32_to_bf16, t2_bf16_to_f32,
 * t2_zero_spans
 */
#include "common.cuh"
#include "vec.cuh"
#include <stdint.h>

__global__ void embedding_fwd_kernel(bf16 *out, const int32_t *tokens, const bf16 *table, int n, int c) {
    const int t = blockIdx.x;
    const bf16 *row = table + (size_t)tokens[t] * c;
    bf16 *o = out + (size_t)t * c;
    for (int i = threadIdx.x; i < c; i += blockDim.x) o[i] = row[i];
}

extern "C" t2_status t2_embedding_fwd(void *out, const int32_t *tokens, const void *table, int n, int c) {
    T2_REQUIRE(n > 0 && c > 0, "t2_embedding_fwd(shape)");
    embedding_fwd_kernel<<<n, 256, 0, t2_stream>>>((bf16 *)out, tokens, (const bf16 *)table, n, c);
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
    embedding_bwd_kernel<<<n, 256, 0, t2_stream>>>(dtable, tokens, dout, n, c);
    T2_LAUNCHED("embedding_bwd_kernel");
    return t2_ok();
}

/* VEC consecutive bf16 at p as floats, and back: VEC = 8 is one 16-byte access (p 16-byte
 * aligned), VEC = 1 a scalar one. */
template <int VEC> __device__ __forceinline__ void load_bf(const bf16 *p, float f[VEC]);
template <> __device__ __forceinline__ void load_bf<8>(const bf16 *p, float f[8]) {
    unpack8(*reinterpret_cast<const uint4 *>(p), f);
}
template <> __device__ __forceinline__ void load_bf<1>(const bf16 *p, float f[1]) { f[0] = __bfloat162float(*p); }
template <int VEC> __device__ __forceinline__ void store_bf(bf16 *p, const float f[VEC]);
template <> __device__ __forceinline__ void store_bf<8>(bf16 *p, const float f[8]) {
    *reinterpret_cast<uint4 *>(p) = pack8(f);
}
template <> __device__ __forceinline__ void store_bf<1>(bf16 *p, const float f[1]) { *p = __float2bfloat16(f[0]); }

__device__ __forceinline__ float sigmoidf(float x) { return 1.f / (1.f + __expf(-x)); }

/* SwiGLU over rows: a 2-D grid, x over the row's VEC-wide column groups, y over rows (strided by
 * gridDim.y; each thread takes two rows per step and issues both rows' loads before computing), so
 * no thread divides its flat index. VEC = 8 when i is a multiple of 8 and the buffers are 16-byte
 * aligned (every row and the up half then are), else 1. */
#define SWIGLU_THREADS 256
#define SWIGLU_MAX_ROW_BLOCKS 32768 /* gridDim.y: ≤ 65535, two rows per thread and step */

template <int VEC>
__global__ void __launch_bounds__(SWIGLU_THREADS) swiglu_fwd_kernel(bf16 *h, const bf16 *gu, int n, int inter) {
    const int j = (blockIdx.x * SWIGLU_THREADS + threadIdx.x) * VEC;
    if (j >= inter) return;
    for (long t = blockIdx.y; t < n; t += 2L * gridDim.y) {
        const long t2 = t + gridDim.y;
        float g[2][VEC], u[2][VEC];
        load_bf<VEC>(gu + (size_t)t * 2 * inter + j, g[0]);
        load_bf<VEC>(gu + (size_t)t * 2 * inter + inter + j, u[0]);
        if (t2 < n) {
            load_bf<VEC>(gu + (size_t)t2 * 2 * inter + j, g[1]);
            load_bf<VEC>(gu + (size_t)t2 * 2 * inter + inter + j, u[1]);
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            if (r == 1 && t2 >= n) break;
            float o[VEC];
#pragma unroll
            for (int e = 0; e < VEC; ++e) o[e] = rbf(g[r][e] * sigmoidf(g[r][e])) * u[r][e];
            store_bf<VEC>(h + (size_t)(r == 0 ? t : t2) * inter + j, o);
        }
    }
}

/* the grid of a swiglu kernel: column groups × row blocks */
static dim3 swiglu_grid(int n, int inter, int vec) {
    const int groups = (inter + vec - 1) / vec;
    long rows = ((long)n + 1) / 2;
    if (rows > SWIGLU_MAX_ROW_BLOCKS) rows = SWIGLU_MAX_ROW_BLOCKS;
    return dim3((unsigned)((groups + SWIGLU_THREADS - 1) / SWIGLU_THREADS), (unsigned)rows);
}

extern "C" t2_status t2_swiglu_fwd(void *h, const void *gu, int n, int i) {
    T2_REQUIRE(n > 0 && i > 0, "t2_swiglu_fwd(shape)");
    if (i % 8 == 0 && aligned16(h) && aligned16(gu)) {
        swiglu_fwd_kernel<8><<<swiglu_grid(n, i, 8), SWIGLU_THREADS, 0, t2_stream>>>((bf16 *)h, (const bf16 *)gu, n, i);
        T2_LAUNCHED("swiglu_fwd_kernel<8>");
        return t2_ok();
    }
    swiglu_fwd_kernel<1><<<swiglu_grid(n, i, 1), SWIGLU_THREADS, 0, t2_stream>>>((bf16 *)h, (const bf16 *)gu, n, i);
    T2_LAUNCHED("swiglu_fwd_kernel<1>");
    return t2_ok();
}

template <int VEC>
__global__ void __launch_bounds__(SWIGLU_THREADS)
    swiglu_bwd_kernel(bf16 *dgu, const bf16 *dh, const bf16 *gu, int n, int inter) {
    const int j = (blockIdx.x * SWIGLU_THREADS + threadIdx.x) * VEC;
    if (j >= inter) return;
    for (long t = blockIdx.y; t < n; t += 2L * gridDim.y) {
        const long t2 = t + gridDim.y;
        float g[2][VEC], u[2][VEC], d[2][VEC];
        load_bf<VEC>(gu + (size_t)t * 2 * inter + j, g[0]);
        load_bf<VEC>(gu + (size_t)t * 2 * inter + inter + j, u[0]);
        load_bf<VEC>(dh + (size_t)t * inter + j, d[0]);
        if (t2 < n) {
            load_bf<VEC>(gu + (size_t)t2 * 2 * inter + j, g[1]);
            load_bf<VEC>(gu + (size_t)t2 * 2 * inter + inter + j, u[1]);
            load_bf<VEC>(dh + (size_t)t2 * inter + j, d[1]);
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            if (r == 1 && t2 >= n) break;
            float dg[VEC], du[VEC];
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                const float sg = sigmoidf(g[r][e]);
                const float s = rbf(g[r][e] * sg);
                const float ds = rbf(d[r][e] * u[r][e]);
                dg[e] = ds * sg * (1.f + g[r][e] * (1.f - sg));
                du[e] = d[r][e] * s;
            }
            bf16 *o = dgu + (size_t)(r == 0 ? t : t2) * 2 * inter;
            store_bf<VEC>(o + j, dg);
            store_bf<VEC>(o + inter + j, du);
        }
    }
}

extern "C" t2_status t2_swiglu_bwd(void *dgu, const void *dh, const void *gu, int n, int i) {
    T2_REQUIRE(n > 0 && i > 0, "t2_swiglu_bwd(shape)");
    if (i % 8 == 0 && aligned16(dgu) && aligned16(dh) && aligned16(gu)) {
        swiglu_bwd_kernel<8><<<swiglu_grid(n, i, 8), SWIGLU_THREADS, 0, t2_stream>>>((bf16 *)dgu, (const bf16 *)dh,
                                                                         (const bf16 *)gu, n, i);
        T2_LAUNCHED("swiglu_bwd_kernel<8>");
        return t2_ok();
    }
    swiglu_bwd_kernel<1><<<swiglu_grid(n, i, 1), SWIGLU_THREADS, 0, t2_stream>>>((bf16 *)dgu, (const bf16 *)dh, (const bf16 *)gu,
                                                                     n, i);
    T2_LAUNCHED("swiglu_bwd_kernel<1>");
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

/* out = bf16(a + b): nvec 16-byte vectors (0 when a pointer is not 16-byte aligned), then the
 * count − 8·nvec trailing elements one by one. */
__global__ void add_bf16_kernel(bf16 *out, const bf16 *a, const bf16 *b, size_t count, size_t nvec) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += stride) {
        float x[8], y[8];
        unpack8(reinterpret_cast<const uint4 *>(a)[i], x);
        unpack8(reinterpret_cast<const uint4 *>(b)[i], y);
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] += y[e];
        reinterpret_cast<uint4 *>(out)[i] = pack8(x);
    }
    for (size_t i = nvec * 8 + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

extern "C" t2_status t2_add_bf16(void *out, const void *a, const void *b, size_t count) {
    if (count == 0) return t2_ok();
    const size_t nvec = aligned16(out) && aligned16(a) && aligned16(b) ? count / 8 : 0;
    add_bf16_kernel<<<grid_for(nvec > 0 ? nvec : count), 256, 0, t2_stream>>>((bf16 *)out, (const bf16 *)a, (const bf16 *)b, count,
                                                                nvec);
    T2_LAUNCHED("add_bf16_kernel");
    return t2_ok();
}

extern "C" t2_status t2_f32_to_bf16(void *dst, const float *src, size_t count) {
    if (count == 0) return t2_ok();
    f32_to_bf16_kernel<<<grid_for(count), 256, 0, t2_stream>>>((bf16 *)dst, src, count);
    T2_LAUNCHED("f32_to_bf16_kernel");
    return t2_ok();
}

extern "C" t2_status t2_bf16_to_f32(float *dst, const void *src, size_t count) {
    if (count == 0) return t2_ok();
    bf16_to_f32_kernel<<<grid_for(count), 256, 0, t2_stream>>>(dst, (const bf16 *)src, count);
    T2_LAUNCHED("bf16_to_f32_kernel");
    return t2_ok();
}

/* zero_spans_kernel: block b zeroes span b (spans are small: norm weights, a few thousand floats). */
__global__ void zero_spans_kernel(float *base, const int64_t *spans) {
    float *p = base + spans[2 * blockIdx.x];
    const int64_t len = spans[2 * blockIdx.x + 1];
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) p[i] = 0.f;
}

extern "C" t2_status t2_zero_spans(float *base, const int64_t *spans, int count) {
    T2_REQUIRE(count >= 0, "t2_zero_spans(count)");
    if (count == 0) return t2_ok();
    zero_spans_kernel<<<count, 256, 0, t2_stream>>>(base, spans);
    T2_LAUNCHED("zero_spans_kernel");
    return t2_ok();
}
