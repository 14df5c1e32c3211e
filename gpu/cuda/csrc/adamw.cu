/*
 * adamw.cu: the optimizer step over the flat fp32 parameter space: global gradient norm (two-stage,
 * deterministic: fixed per-block partial sums, summed in fp64 on the host), then one fused kernel
 * that applies the clip factor, torch.optim.AdamW's update (decoupled weight decay, bias-corrected
 * moments, eps added after the sqrt), writes the fp32 master, its bf16 copy (round to nearest, as a
 * .to(bfloat16) does) and zeroes the gradient for the next accumulation.
 * defines: t2_sumsq, t2_adamw
 */
#include "common.cuh"
#include <math.h>

__global__ void sumsq_kernel(float *partial, const float *g, size_t count) {
    __shared__ float sred[32];
    float s = 0.f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        const float x = g[i];
        s += x * x;
    }
    s = block_sum(s, sred);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

extern "C" t2_status t2_sumsq(double *sumsq, float *partial, const float *g, size_t count) {
    float host[T2_NORM_BLOCKS];
    T2_REQUIRE(count > 0, "t2_sumsq(count)");
    sumsq_kernel<<<T2_NORM_BLOCKS, 256>>>(partial, g, count);
    T2_LAUNCHED("sumsq_kernel");
    T2_CUDA(cudaMemcpy(host, partial, sizeof(host), cudaMemcpyDeviceToHost));
    double s = 0.0;
    for (int i = 0; i < T2_NORM_BLOCKS; ++i) s += (double)host[i];
    *sumsq = s;
    return t2_ok();
}

__global__ void adamw_kernel(float *master, bf16 *param, float *grad, float *m, float *v, size_t count, float lr,
                             float beta1, float beta2, float eps, float wd, float grad_scale, float bc1,
                             float bc2_sqrt) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        const float g = grad[i] * grad_scale;
        float mi = m[i], vi = v[i], p = master[i];
        p *= 1.f - lr * wd;
        mi += (g - mi) * (1.f - beta1);
        vi = vi * beta2 + (1.f - beta2) * g * g;
        const float denom = sqrtf(vi) / bc2_sqrt + eps;
        p -= (lr / bc1) * mi / denom;
        m[i] = mi;
        v[i] = vi;
        master[i] = p;
        param[i] = __float2bfloat16(p);
        grad[i] = 0.f;
    }
}

extern "C" t2_status t2_adamw(float *master, void *param_bf16, float *grad, float *m, float *v, size_t count, float lr,
                              float beta1, float beta2, float eps, float weight_decay, float grad_scale, float bc1,
                              float bc2) {
    T2_REQUIRE(count > 0 && bc1 > 0.f && bc2 > 0.f, "t2_adamw(args)");
    size_t blocks = (count + 255) / 256;
    if (blocks > 132 * 16) blocks = 132 * 16;
    adamw_kernel<<<(int)blocks, 256>>>(master, (bf16 *)param_bf16, grad, m, v, count, lr, beta1, beta2, eps,
                                       weight_decay, grad_scale, bc1, sqrtf(bc2));
    T2_LAUNCHED("adamw_kernel");
    return t2_ok();
}
