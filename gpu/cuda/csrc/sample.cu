/*
 * sample.cu: the serving sampler, on the device, by gpu.SampleLogits's rule (gpu/sample.go), so the
 * CUDA and pure-Go decoders draw the same token for the same uniform (up to fp32 rounding at a
 * boundary). One block of 1024 threads per row of bf16 logits; only (token, log-prob) leaves the
 * device.
 *
 *   1. argmax of the raw logits, ties to the lowest id (greedy stops here, T = 1 for its log-prob);
 *   2. z = ℓ·(1/T) and d = z − zmax in fp32 with no contraction (__fmul_rn/__fsub_rn: Go does not
 *      fuse them), the normaliser Σ exp(d) in fp64, log-prob = d − log Σ (unfiltered);
 *   3. the filter threshold on z without sorting: min-p directly (zmax + log MinP); top-k (the k-th
 *      largest z) and top-p (the largest z whose upper mass reaches TopP·Σ) by bisection over the
 *      order-preserving integer keys of z — on a compacted candidate set in shared memory when a
 *      1/8-nat histogram of d shows that both thresholds lie among the top T2_SAMPLE_CAND values,
 *      else over the whole row;
 *   4. the draw in increasing id order: each warp sums the kept mass of its contiguous id segment,
 *      the segment holding u·(kept mass) is walked 32 ids at a time with a warp prefix sum.
 * Exponentials are fp32 expf summed in fp64 (the reference uses fp64 exp: they differ by ~1e-7
 * relative, which only moves a draw sitting on a boundary).
 * defines: t2_sample
 */
#include "common.cuh"
#include "vec.cuh"
#include <math.h>
#include <stdint.h>
#include <limits.h>

#define SP_THREADS 1024
#define SP_WARPS (SP_THREADS / 32)
#define SP_BUCKETS 255 /* histogram of −d in 1/8 nats; beyond the last bucket is the tail */

__device__ __forceinline__ uint32_t zkey(float z) {
    if (z == 0.f) z = 0.f; /* −0 and +0 are the same value to the reference's comparisons */
    const uint32_t u = __float_as_uint(z);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float keyz(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

template <typename T> __device__ __forceinline__ T wsum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* block-wide sum of one value per thread; every thread gets it; `sh` holds SP_WARPS values */
template <typename T> __device__ __forceinline__ T bsum(T v, T *sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = wsum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    T r = lane < SP_WARPS ? sh[lane] : T(0);
    r = wsum(r);
    __syncthreads();
    return r;
}

/* fn(i, logit) for ids i = first, first + stride, … < end (in units of 8-id vectors when vec: 16-byte
 * loads, the row being 16-byte aligned when v is a multiple of 8) */
template <typename F>
__device__ __forceinline__ void for_ids(const bf16 *L, bool vec, int first, int end, int stride, F fn) {
    if (vec) {
        for (int i8 = first; i8 < end; i8 += stride) {
            float f[8];
            unpack8(__ldg(reinterpret_cast<const uint4 *>(L) + i8), f);
#pragma unroll
            for (int e = 0; e < 8; ++e) fn(i8 * 8 + e, f[e]);
        }
    } else {
        for (int i = first; i < end; i += stride) fn(i, __bfloat162float(L[i]));
    }
}

__device__ __forceinline__ void amax_merge(float &bv, int &bi, float ov, int oi) {
    if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
}

struct SampleShared {
    float cand[T2_SAMPLE_CAND];
    int hcount[SP_BUCKETS];
    float hmass[SP_BUCKETS];
    double dsh[SP_WARPS];
    float fsh[SP_WARPS];
    int ish[SP_WARPS];
    int ncand;
    int seg_warp;
    double seg_before;
};

/* count of keys ≥ tk and mass (Σ exp(d)) of keys ≥ tp over the candidates or the row */
template <bool CAND>
__device__ void count_mass(const bf16 *L, int v, float inv, float zmax, const SampleShared &s, int nc, uint64_t tk,
                           uint64_t tp, int &cnt, float &mass) {
    cnt = 0;
    mass = 0.f;
    const int n = CAND ? nc : v;
    for (int i = threadIdx.x; i < n; i += SP_THREADS) {
        const float z = CAND ? s.cand[i] : __fmul_rn(__bfloat162float(L[i]), inv);
        const uint32_t k = zkey(z);
        cnt += (uint64_t)k >= tk;
        if ((uint64_t)k >= tp) mass += expf(__fsub_rn(z, zmax));
    }
}

/* bisection for the top-k key (largest key with count(≥) ≥ k) and the top-p key (largest key with
 * mass(≥) ≥ target), both in the same passes; lo/hi bracket them (lo satisfies, hi does not) */
template <bool CAND>
__device__ void bisect(const bf16 *L, int v, float inv, float zmax, SampleShared &s, int nc, int k, double target,
                       uint64_t &klo, uint64_t khi, uint64_t &plo, uint64_t phi) {
    while (khi - klo > 1 || phi - plo > 1) {
        const uint64_t km = khi - klo > 1 ? klo + (khi - klo) / 2 : khi; /* khi: counts nothing */
        const uint64_t pm = phi - plo > 1 ? plo + (phi - plo) / 2 : phi;
        int cnt;
        float mass;
        count_mass<CAND>(L, v, inv, zmax, s, nc, km, pm, cnt, mass);
        cnt = bsum(cnt, s.ish);
        const double m = bsum((double)mass, s.dsh);
        if (khi - klo > 1) {
            if (cnt >= k) klo = km;
            else khi = km;
        }
        if (phi - plo > 1) {
            if (m >= target) plo = pm;
            else phi = pm;
        }
    }
}

__global__ void __launch_bounds__(SP_THREADS) sample_kernel(int32_t *out, const bf16 *logits, const float *fp,
                                                            const int32_t *topk, const double *uu, int v) {
    __shared__ SampleShared s;
    const int row = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const bf16 *L = logits + (size_t)row * v;
    const float temp = fp[3 * row], top_p = fp[3 * row + 1], min_p = fp[3 * row + 2];
    const int k = topk[row];
    const double u = uu[row];
    const bool greedy = temp == 0.f;
    const float inv = greedy ? 1.f : __fdiv_rn(1.f, temp);

    /* 1. argmax (lowest id on ties) and the smallest logit */
    const bool vec = v % 8 == 0;
    const int vend = vec ? v / 8 : v;
    float bv = -INFINITY, mn = INFINITY;
    int bi = INT_MAX;
    for_ids(L, vec, tid, vend, SP_THREADS, [&](int i, float x) {
        if (x > bv) bv = x, bi = i;
        mn = fminf(mn, x);
    });
    for (int o = 16; o > 0; o >>= 1) {
        amax_merge(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
        mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
    }
    if (lane == 0) s.fsh[warp] = bv, s.ish[warp] = bi, s.cand[warp] = mn;
    __syncthreads();
    if (warp == 0) {
        bv = s.fsh[lane], bi = s.ish[lane], mn = s.cand[lane];
        for (int o = 16; o > 0; o >>= 1) {
            amax_merge(bv, bi, __shfl_xor_sync(0xffffffffu, bv, o), __shfl_xor_sync(0xffffffffu, bi, o));
            mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
        }
        if (lane == 0) s.fsh[0] = bv, s.ish[0] = bi, s.cand[0] = mn;
    }
    __syncthreads();
    bv = s.fsh[0], bi = s.ish[0], mn = s.cand[0];
    __syncthreads();
    const float zmax = __fmul_rn(bv, inv);

    /* 2. normaliser; the 1/8-nat histogram of −d for the thresholds */
    for (int b = tid; b < SP_BUCKETS; b += SP_THREADS) s.hcount[b] = 0, s.hmass[b] = 0.f;
    if (tid == 0) s.ncand = 0;
    __syncthreads();
    const bool use_k = !greedy && k > 0 && k < v, use_p = !greedy && top_p < 1.f;
    double sum = 0.0;
    const bool hist = use_k || use_p;
    for_ids(L, vec, tid, vend, SP_THREADS, [&](int, float x) {
        const float d = __fsub_rn(__fmul_rn(x, inv), zmax);
        const float e = expf(d);
        sum += (double)e;
        if (hist) {
            const float b = -d * 8.f;
            if (b < (float)SP_BUCKETS) {
                atomicAdd(&s.hcount[(int)b], 1);
                atomicAdd(&s.hmass[(int)b], e);
            }
        }
    });
    sum = bsum(sum, s.dsh);
    const float logZ = (float)log(sum);
    if (greedy) {
        if (tid == 0) {
            out[2 * row] = bi;
            out[2 * row + 1] = __float_as_int(__fsub_rn(__fsub_rn(__fmul_rn(bv, inv), zmax), logZ));
        }
        return;
    }

    /* 3. threshold on z */
    float thr = -INFINITY;
    if (min_p > 0.f) thr = fmaxf(thr, __fadd_rn(zmax, (float)log((double)min_p)));
    if (use_k || use_p) {
        const double target = (double)top_p * sum;
        /* the bucket (from the top) where each criterion is met; −1 = not within the histogram */
        if (tid == 0) {
            int cb = use_k ? -1 : 0, pb = use_p ? -1 : 0, c = 0;
            double m = 0;
            for (int b = 0; b < SP_BUCKETS && (cb < 0 || pb < 0); ++b) {
                c += s.hcount[b];
                m += s.hmass[b];
                if (cb < 0 && c >= k) cb = b;
                if (pb < 0 && m >= target * (1 - 1e-5)) pb = b;
            }
            int last = (cb < 0 || pb < 0) ? -1 : min(SP_BUCKETS - 1, max(cb, pb) + 1); /* one bucket of margin */
            int cnt = 0;
            for (int b = 0; b <= last; ++b) cnt += s.hcount[b];
            s.seg_warp = (last >= 0 && cnt <= T2_SAMPLE_CAND) ? last : -1;
        }
        __syncthreads();
        const int last = s.seg_warp;
        const uint64_t zlo = zkey(__fmul_rn(mn, inv)), zhi = (uint64_t)zkey(zmax) + 1;
        uint64_t klo = use_k ? zlo : zhi - 1, plo = use_p ? zlo : zhi - 1;
        if (last >= 0) {
            /* candidates: every z with −d·8 < last+1, i.e. the top buckets through `last` */
            const float cut = (float)(last + 1);
            for (int i0 = 0; i0 < v; i0 += SP_THREADS) {
                const int i = i0 + tid;
                float z = 0.f;
                bool keep = false;
                if (i < v) {
                    z = __fmul_rn(__bfloat162float(L[i]), inv);
                    keep = -__fsub_rn(z, zmax) * 8.f < cut;
                }
                const unsigned bal = __ballot_sync(0xffffffffu, keep);
                int base = 0;
                if (lane == 0 && bal) base = atomicAdd(&s.ncand, __popc(bal));
                base = __shfl_sync(0xffffffffu, base, 0);
                if (keep) s.cand[base + __popc(bal & ((1u << lane) - 1))] = z;
            }
            __syncthreads();
            const int nc = s.ncand;
            /* candidates hold every z above the lowest candidate, so the brackets start there */
            bisect<true>(L, v, inv, zmax, s, nc, k, target, klo, zhi, plo, zhi);
        } else {
            bisect<false>(L, v, inv, zmax, s, 0, k, target, klo, zhi, plo, zhi);
        }
        if (use_k) thr = fmaxf(thr, keyz((uint32_t)klo));
        if (use_p) thr = fmaxf(thr, keyz((uint32_t)plo));
    }

    /* 4. the draw: warp w owns ids [w·seg, (w+1)·seg) */
    const int seg = vec ? (v + 8 * SP_WARPS - 1) / (8 * SP_WARPS) * 8 : (v + SP_WARPS - 1) / SP_WARPS;
    const int lo = min(v, warp * seg), hi = min(v, lo + seg);
    double wm = 0.0;
    int lastk = -1;
    for_ids(L, vec, (vec ? lo / 8 : lo) + lane, vec ? hi / 8 : hi, 32, [&](int i, float x) {
        const float z = __fmul_rn(x, inv);
        if (z >= thr) {
            wm += (double)expf(__fsub_rn(z, zmax));
            lastk = i;
        }
    });
    wm = wsum(wm);
    for (int o = 16; o > 0; o >>= 1) lastk = max(lastk, __shfl_xor_sync(0xffffffffu, lastk, o));
    if (lane == 0) s.dsh[warp] = wm, s.ish[warp] = lastk;
    __syncthreads();
    if (tid == 0) {
        double mass = 0;
        int lk = -1;
        for (int w = 0; w < SP_WARPS; ++w) mass += s.dsh[w], lk = max(lk, s.ish[w]);
        const double target = u * mass;
        double cum = 0;
        int ww = -1;
        for (int w = 0; w < SP_WARPS; ++w) {
            if (cum + s.dsh[w] > target) {
                ww = w;
                break;
            }
            cum += s.dsh[w];
        }
        s.seg_warp = ww;
        s.seg_before = cum;
        s.fsh[0] = __int_as_float(lk);
        s.dsh[0] = target; /* the per-warp sums are consumed */
    }
    __syncthreads();
    const int ww = s.seg_warp;
    int token = __float_as_int(s.fsh[0]); /* the last kept token, if rounding leaves none */
    if (warp == ww) {
        const double target = s.dsh[0];
        double acc = s.seg_before;
        int found = -1;
        for (int i0 = lo; i0 < hi && found < 0; i0 += 32) {
            const int i = i0 + lane;
            double m = 0.0;
            if (i < hi) {
                const float z = __fmul_rn(__bfloat162float(L[i]), inv);
                if (z >= thr) m = (double)expf(__fsub_rn(z, zmax));
            }
            double x = m; /* inclusive prefix sum over the lanes */
            for (int o = 1; o < 32; o <<= 1) {
                const double y = __shfl_up_sync(0xffffffffu, x, o);
                if (lane >= o) x += y;
            }
            const unsigned hit = __ballot_sync(0xffffffffu, m > 0.0 && acc + x > target);
            if (hit) found = i0 + __ffs(hit) - 1;
            acc += __shfl_sync(0xffffffffu, x, 31);
        }
        if (found >= 0) token = found;
        if (lane == 0) s.ish[0] = token;
    }
    __syncthreads();
    if (tid == 0) {
        token = ww >= 0 ? s.ish[0] : token;
        const float z = __fmul_rn(__bfloat162float(L[token]), inv);
        out[2 * row] = token;
        out[2 * row + 1] = __float_as_int(__fsub_rn(__fsub_rn(z, zmax), logZ));
    }
}

extern "C" t2_status t2_sample(int32_t *out, const void *logits, const float *fparams, const int32_t *top_k,
                               const double *uniform, int rows, int v) {
    T2_REQUIRE(rows > 0 && v > 0, "t2_sample(shape)");
    sample_kernel<<<rows, SP_THREADS, 0, t2_stream>>>(out, (const bf16 *)logits, fparams, top_k, uniform, v);
    T2_LAUNCHED("sample_kernel");
    return t2_ok();
}
