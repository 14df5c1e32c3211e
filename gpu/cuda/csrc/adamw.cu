/*
 * adamw.cu: the optimizer step over the flat fp32 parameter space: global gradient norm (two-stage,
 * deterministic: fixed per-block partial sums, summed in fp64 on the host), then one fused kernel
 * that applies the clip factor, torch.optim.AdamW's update (decoupled weight decay, bias-corrected
 * moments, eps added after the sqrt) and writes the fp32 master and its bf16 copy (round to nearest,
 * as a .to(bfloat16) does). It leaves the gradient as it is: the next backward pass overwrites it
 * (weight-gradient GEMMs with beta = 0, t2_zero_spans for the rest; backend.go's gradsStale), so
 * the step does not write 4 more bytes per parameter to zero it.
 *
 * Both kernels stream the whole parameter space (AdamW moves 30 bytes per parameter), so they read
 * and write float4 (and 4 bf16 as 8 bytes) when the buffers are aligned, with a scalar tail for a
 * count that is not a multiple of 4.
 * defines: t2_sumsq, t2_adamw
 */
#include "common.cuh"
#include "vec.cuh"
#include <math.h>
#include <stdint.h>

#define OPT_THREADS 256

/* sumsq_kernel: partial[block] = Σ g² over the block's grid-stride share; float4 over the first
 * nvec·4 elements (nvec = 0 when g is not 16-byte aligned), then the tail. */
__global__ void __launch_bounds__(OPT_THREADS) sumsq_kernel(float *partial, const float *g, size_t count, size_t nvec) {
    __shared__ float sred[32];
    const size_t stride = (size_t)gridDim.x * OPT_THREADS;
    float s = 0.f;
    for (size_t i = (size_t)blockIdx.x * OPT_THREADS + threadIdx.x; i < nvec; i += stride) {
        const float4 x = reinterpret_cast<const float4 *>(g)[i];
        s += x.x * x.x;
        s += x.y * x.y;
        s += x.z * x.z;
        s += x.w * x.w;
    }
    for (size_t i = nvec * 4 + (size_t)blockIdx.x * OPT_THREADS + threadIdx.x; i < count; i += stride) {
        const float x = g[i];
        s += x * x;
    }
    s = block_sum(s, sred);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

extern "C" t2_status t2_sumsq(double *sumsq, float *partial, const float *g, size_t count) {
    float host[T2_NORM_BLOCKS];
    T2_REQUIRE(count > 0, "t2_sumsq(count)");
    const size_t nvec = aligned16(g) ? count / 4 : 0;
    sumsq_kernel<<<T2_NORM_BLOCKS, OPT_THREADS, 0, t2_stream>>>(partial, g, count, nvec);
    T2_LAUNCHED("sumsq_kernel");
    T2_CUDA(cudaMemcpy(host, partial, sizeof(host), cudaMemcpyDeviceToHost));
    double s = 0.0;
    for (int i = 0; i < T2_NORM_BLOCKS; ++i) s += (double)host[i];
    *sumsq = s;
    return t2_ok();
}

/* The AdamW constants of one step (bc2_sqrt = sqrt(bc2)). */
struct adamw_args {
    float lr, beta1, beta2, eps, wd, grad_scale, bc1, bc2_sqrt;
};

/* adamw_one updates one parameter: the master value p and moments mi, vi from the raw gradient g. */
__device__ __forceinline__ void adamw_one(float &p, float &mi, float &vi, float graw, const adamw_args &a) {
    const float g = graw * a.grad_scale;
    p *= 1.f - a.lr * a.wd;
    mi += (g - mi) * (1.f - a.beta1);
    vi = vi * a.beta2 + (1.f - a.beta2) * g * g;
    const float denom = sqrtf(vi) / a.bc2_sqrt + a.eps;
    p -= (a.lr / a.bc1) * mi / denom;
}

/* adamw_kernel: float4 over the first nvec·4 parameters (nvec = 0 unless the fp32 buffers are
 * 16-byte and param 8-byte aligned), then the tail one by one. */
__global__ void __launch_bounds__(OPT_THREADS) adamw_kernel(float *master, bf16 *param, const float *grad, float *m,
                                                            float *v, size_t count, size_t nvec, adamw_args a) {
    const size_t stride = (size_t)gridDim.x * OPT_THREADS;
    for (size_t i = (size_t)blockIdx.x * OPT_THREADS + threadIdx.x; i < nvec; i += stride) {
        const float4 g = reinterpret_cast<const float4 *>(grad)[i];
        float4 mi = reinterpret_cast<const float4 *>(m)[i], vi = reinterpret_cast<const float4 *>(v)[i],
               p = reinterpret_cast<const float4 *>(master)[i];
        adamw_one(p.x, mi.x, vi.x, g.x, a);
        adamw_one(p.y, mi.y, vi.y, g.y, a);
        adamw_one(p.z, mi.z, vi.z, g.z, a);
        adamw_one(p.w, mi.w, vi.w, g.w, a);
        reinterpret_cast<float4 *>(m)[i] = mi;
        reinterpret_cast<float4 *>(v)[i] = vi;
        reinterpret_cast<float4 *>(master)[i] = p;
        reinterpret_cast<uint2 *>(param)[i] = make_uint2(pack2(p.x, p.y), pack2(p.z, p.w));
    }
    for (size_t i = nvec * 4 + (size_t)blockIdx.x * OPT_THREADS + threadIdx.x; i < count; i += stride) {
        float p = master[i], mi = m[i], vi = v[i];
        adamw_one(p, mi, vi, grad[i], a);
        m[i] = mi;
        v[i] = vi;
        master[i] = p;
        param[i] = __float2bfloat16(p);
    }
}

extern "C" t2_status t2_adamw(float *master, void *param_bf16, float *grad, float *m, float *v, size_t count, float lr,
                              float beta1, float beta2, float eps, float weight_decay, float grad_scale, float bc1,
                              float bc2) {
    T2_REQUIRE(count > 0 && bc1 > 0.f && bc2 > 0.f, "t2_adamw(args)");
    const bool vec = aligned16(master) && aligned16(grad) && aligned16(m) && aligned16(v) &&
                     ((uintptr_t)param_bf16 & 7u) == 0;
    const size_t nvec = vec ? count / 4 : 0;
    /* a resident grid (every SM full, no tail wave), each thread striding over the buffers */
    int resident = 0;
    T2_CUDA(resident_blocks(adamw_kernel, OPT_THREADS, 0, &resident));
    const size_t work = nvec > 0 ? nvec : count; /* per-thread items of the longer of the two loops */
    size_t blocks = (work + OPT_THREADS - 1) / OPT_THREADS;
    if (blocks > (size_t)resident) blocks = (size_t)resident;
    const adamw_args a = {lr, beta1, beta2, eps, weight_decay, grad_scale, bc1, sqrtf(bc2)};
    adamw_kernel<<<(int)blocks, OPT_THREADS, 0, t2_stream>>>(master, (bf16 *)param_bf16, grad, m, v, count, nvec, a);
    T2_LAUNCHED("adamw_kernel");
    return t2_ok();
}
