/*
 * paged_attention.cu: the serving attention over a paged KV cache (vLLM's layout, SGLang's
 * prefix sharing at block granularity), in three kernels:
 *
 *   kv_write      the step's new keys and values into their cache slots;
 *   paged_attn    each new query token against its sequence's cached positions [0, start), split
 *                 over the key range (flash-decoding) so a small decode batch still fills the chip;
 *                 one work item = (up to T2_PAGED_ROWS query rows of one sequence and one KV head,
 *                 one key range), writing a normalised partial output and its base-2 log-sum-exp;
 *   paged_merge   merges the partials with the FA2 kernel's result over the step's own tokens (the
 *                 in-chunk causal part, run by t2_attention_fwd on the packed step), as FlashInfer's
 *                 merge_state does, writing the bf16 attention output in place; a step of decode
 *                 tokens only skips FA2: its items cover [0, start] (the token's own key is written
 *                 first) and the merge has no base.
 *
 * Cache layout: per layer one K and one V buffer of [slots][kv_heads·head_dim] bf16, slot =
 * block·block_size + offset: one token's keys of all KV heads are contiguous (a 16-byte vector
 * per lane, 128/256 contiguous bytes per head), and a block is block_size·kv_dim contiguous values.
 *
 * Scores are in the base-2 domain, scaled by log2(e)/sqrt(d), as attention_fa2.cu's lse is, so the
 * two results merge exactly; P is rounded to bf16 for P·V while the row sums add fp32 P, as the FA2
 * kernel does, so decode and training attention round alike. Partial outputs are fp32.
 * defines: t2_kv_write, t2_paged_attention, t2_paged_merge, t2_fill_random_bf16
 */
#include "common.cuh"
#include "vec.cuh"
#include <math.h>
#include <stdint.h>

#define PA_THREADS 128
#define PA_KEYS 64 /* keys per shared-memory chunk */

__global__ void kv_write_kernel(bf16 *kc, bf16 *vc, const bf16 *k, const bf16 *v, int ks, int vs,
                                const int32_t *slots, int n, int kvdim) {
    const int t = blockIdx.x;
    const int c = threadIdx.x * 8;
    if (c >= kvdim) return;
    const size_t dst = (size_t)slots[t] * kvdim + c;
    *reinterpret_cast<uint4 *>(kc + dst) = *reinterpret_cast<const uint4 *>(k + (size_t)t * ks + c);
    *reinterpret_cast<uint4 *>(vc + dst) = *reinterpret_cast<const uint4 *>(v + (size_t)t * vs + c);
}

extern "C" t2_status t2_kv_write(void *kc, void *vc, const void *k, const void *v, int k_stride, int v_stride,
                                 const int32_t *slots, int n, int kvdim) {
    T2_REQUIRE(n > 0 && kvdim > 0 && kvdim % 8 == 0 && kvdim <= 8 * 1024, "t2_kv_write(shape)");
    T2_REQUIRE(k_stride % 8 == 0 && v_stride % 8 == 0 && aligned16(k) && aligned16(v) && aligned16(kc) &&
                   aligned16(vc),
               "t2_kv_write(alignment)");
    kv_write_kernel<<<n, (kvdim / 8 + 31) / 32 * 32, 0, t2_stream>>>((bf16 *)kc, (bf16 *)vc, (const bf16 *)k, (const bf16 *)v,
                                                       k_stride, v_stride, slots, n, kvdim);
    T2_LAUNCHED("kv_write_kernel");
    return t2_ok();
}

/* One block per work item. Shared: Q rows (fp32, pre-scaled), a chunk of K and V (bf16 rows of
 * D/2+1 words: the score loop's lanes read 32 different keys at one column, conflict-free), the
 * chunk's scores/probabilities, and the rows' running max, sum and rescale factor. */
template <int D, int R>
__global__ void __launch_bounds__(PA_THREADS) paged_attn_kernel(float *part_o, float *part_lse, const bf16 *q,
                                                                int q_stride, const bf16 *kc, const bf16 *vc,
                                                                const int32_t *tables, const int32_t *items,
                                                                int block_size, int g, int kvdim, float sl2) {
    constexpr int W = D / 2 + 1; /* words per shared K/V row */
    __shared__ float sQ[R][D];
    __shared__ uint32_t sK[PA_KEYS * W];
    __shared__ uint32_t sV[PA_KEYS * W];
    __shared__ float sS[R][PA_KEYS];
    __shared__ float sM[R], sL[R], sA[R];

    const int *it = items + (size_t)blockIdx.x * 8;
    const int tok0 = it[0], ntok = it[1], kvh = it[2], key_lo = it[3], key_hi = it[4], tbl = it[5], pidx = it[6];
    const int rows = ntok * g;
    const int tid = threadIdx.x;

    for (int idx = tid; idx < R * D; idx += PA_THREADS) {
        const int r = idx / D, c = idx - r * D;
        float x = 0.f;
        if (r < rows) {
            const int t = tok0 + r / g, h = kvh * g + r % g;
            x = __bfloat162float(q[(size_t)t * q_stride + h * D + c]) * sl2;
        }
        sQ[r][c] = x;
    }
    if (tid < R) {
        sM[tid] = -INFINITY;
        sL[tid] = 0.f;
    }
    /* output accumulators: column oc, rows orow0 + i·ORS */
    constexpr int ORS = PA_THREADS / D;           /* 1 (D=128) or 2 (D=64) */
    constexpr int NACC = R / ORS > 0 ? R / ORS : 1; /* rows per thread */
    const int oc = tid % D, orow0 = tid / D;
    float acc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; ++i) acc[i] = 0.f;
    /* scores: key sj, rows srow0 + i·2 */
    const int sj = tid % PA_KEYS, srow0 = tid / PA_KEYS;

    for (int k0 = key_lo; k0 < key_hi; k0 += PA_KEYS) {
        const int nk = min(PA_KEYS, key_hi - k0);
        __syncthreads(); /* the previous chunk's K, V, S are consumed */
        constexpr int VPR = D / 8;
        for (int idx = tid; idx < PA_KEYS * VPR; idx += PA_THREADS) {
            const int j = idx / VPR, c8 = idx - j * VPR;
            uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
            if (j < nk) {
                const int p = k0 + j;
                const long slot = (long)tables[tbl + p / block_size] * block_size + p % block_size;
                const size_t o = (size_t)slot * kvdim + kvh * D + c8 * 8;
                kv = *reinterpret_cast<const uint4 *>(kc + o);
                vv = *reinterpret_cast<const uint4 *>(vc + o);
            }
            uint32_t *dk = sK + j * W + c8 * 4, *dv = sV + j * W + c8 * 4;
            dk[0] = kv.x, dk[1] = kv.y, dk[2] = kv.z, dk[3] = kv.w;
            dv[0] = vv.x, dv[1] = vv.y, dv[2] = vv.z, dv[3] = vv.w;
        }
        __syncthreads();
        /* S = Q·Kᵀ (base-2 scaled) */
        {
            float s[R / 2];
#pragma unroll
            for (int i = 0; i < R / 2; ++i) s[i] = 0.f;
            const uint32_t *krow = sK + sj * W;
#pragma unroll 4
            for (int c2 = 0; c2 < D / 2; ++c2) {
                const uint32_t w = krow[c2];
                const float k0f = __uint_as_float(w << 16), k1f = __uint_as_float(w & 0xffff0000u);
#pragma unroll
                for (int i = 0; i < R / 2; ++i) {
                    const int r = srow0 + 2 * i;
                    if (r < rows) s[i] += sQ[r][2 * c2] * k0f + sQ[r][2 * c2 + 1] * k1f;
                }
            }
#pragma unroll
            for (int i = 0; i < R / 2; ++i)
                if (srow0 + 2 * i < rows) sS[srow0 + 2 * i][sj] = sj < nk ? s[i] : -INFINITY;
        }
        __syncthreads();
        /* online softmax: warp w takes rows w, w+4, … */
        {
            const int warp = tid >> 5, lane = tid & 31;
            for (int r = warp; r < rows; r += PA_THREADS / 32) {
                const float a = sS[r][lane], b = sS[r][lane + 32];
                const float mx = warp_max(fmaxf(a, b));
                const float mold = sM[r], mnew = fmaxf(mold, mx);
                const float pa = exp2f(a - mnew), pb = exp2f(b - mnew);
                sS[r][lane] = rbf(pa); /* P·V from bf16 P, the sum from fp32 P: attention_fa2.cu's arithmetic */
                sS[r][lane + 32] = rbf(pb);
                const float sum = warp_sum(pa + pb);
                if (lane == 0) {
                    const float alpha = exp2f(mold - mnew);
                    sA[r] = alpha;
                    sL[r] = sL[r] * alpha + sum;
                    sM[r] = mnew;
                }
            }
        }
        __syncthreads();
        /* O = O·alpha + P·V */
#pragma unroll
        for (int i = 0; i < NACC; ++i) {
            const int r = orow0 + i * ORS;
            if (r < rows) acc[i] *= sA[r];
        }
        const bf16 *vcol = reinterpret_cast<const bf16 *>(sV) + oc;
        for (int j = 0; j < nk; ++j) {
            const float vj = __bfloat162float(vcol[j * 2 * W]);
#pragma unroll
            for (int i = 0; i < NACC; ++i)
                if (orow0 + i * ORS < rows) acc[i] += sS[orow0 + i * ORS][j] * vj;
        }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < NACC; ++i) {
        const int r = orow0 + i * ORS;
        if (r < rows) {
            const float l = sL[r];
            part_o[((size_t)pidx * T2_PAGED_ROWS + r) * D + oc] = l > 0.f ? acc[i] / l : 0.f;
            if (oc == 0) part_lse[(size_t)pidx * T2_PAGED_ROWS + r] = l > 0.f ? sM[r] + log2f(l) : -INFINITY;
        }
    }
}

template <int D, int R>
static void paged_launch(int nitems, float *part_o, float *part_lse, const void *q, int q_stride, const void *kc,
                         const void *vc, const int32_t *tables, const int32_t *items, int block_size, int g, int kvdim,
                         float sl2) {
    paged_attn_kernel<D, R><<<nitems, PA_THREADS, 0, t2_stream>>>(part_o, part_lse, (const bf16 *)q, q_stride,
                                                                  (const bf16 *)kc, (const bf16 *)vc, tables, items,
                                                                  block_size, g, kvdim, sl2);
}

template <int D>
static void paged_launch_rows(int rmax, int nitems, float *part_o, float *part_lse, const void *q, int q_stride,
                              const void *kc, const void *vc, const int32_t *tables, const int32_t *items,
                              int block_size, int g, int kvdim, float sl2) {
    switch (rmax) {
    case 2: paged_launch<D, 2>(nitems, part_o, part_lse, q, q_stride, kc, vc, tables, items, block_size, g, kvdim, sl2); break;
    case 4: paged_launch<D, 4>(nitems, part_o, part_lse, q, q_stride, kc, vc, tables, items, block_size, g, kvdim, sl2); break;
    case 8: paged_launch<D, 8>(nitems, part_o, part_lse, q, q_stride, kc, vc, tables, items, block_size, g, kvdim, sl2); break;
    default:
        paged_launch<D, T2_PAGED_ROWS>(nitems, part_o, part_lse, q, q_stride, kc, vc, tables, items, block_size, g,
                                       kvdim, sl2);
    }
}

extern "C" t2_status t2_paged_attention(float *part_o, float *part_lse, const void *q, int q_stride, const void *kc,
                                        const void *vc, const int32_t *tables, const int32_t *items, int nitems,
                                        int block_size, int nh, int nkv, int d, int max_rows) {
    T2_REQUIRE(nitems > 0 && nh > 0 && nkv > 0 && nh % nkv == 0 && nh / nkv <= T2_PAGED_ROWS && block_size > 0,
               "t2_paged_attention(shape)");
    /* the kernel's row capacity: the smallest of 2, 4, 8, 16 holding every item's rows */
    const int rmax = max_rows <= 2 ? 2 : max_rows <= 4 ? 4 : max_rows <= 8 ? 8 : T2_PAGED_ROWS;
    T2_REQUIRE(max_rows >= 1 && max_rows <= T2_PAGED_ROWS, "t2_paged_attention(max_rows)");
    const float sl2 = (float)(1.4426950408889634 / sqrt((double)d));
    const int g = nh / nkv, kvdim = nkv * d;
    switch (d) {
    case 64: paged_launch_rows<64>(rmax, nitems, part_o, part_lse, q, q_stride, kc, vc, tables, items, block_size, g, kvdim, sl2); break;
    case 128: paged_launch_rows<128>(rmax, nitems, part_o, part_lse, q, q_stride, kc, vc, tables, items, block_size, g, kvdim, sl2); break;
    default: return t2_fail(-1, "t2_paged_attention(head_dim)", __FILE__, __LINE__, "head_dim must be 64 or 128");
    }
    T2_LAUNCHED("paged_attn_kernel");
    return t2_ok();
}

/* One warp per (token, head). tok_info[t] = {first item, splits, row of the token's first head in
 * its items}: the partials of (t, h) are items first + (h / g)·splits + s, row row0 + h % g. */
__global__ void paged_merge_kernel(bf16 *att, const float *lse, const float *part_o, const float *part_lse,
                                   const int32_t *tok_info, int n, int nh, int g, int d, int has_base) {
    const long wid = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (wid >= (long)n * nh) return;
    const int t = (int)(wid / nh), h = (int)(wid - (long)t * nh);
    const int first = tok_info[3 * t], splits = tok_info[3 * t + 1], row = tok_info[3 * t + 2] + h % g;
    if (first < 0) return;
    const int base = first + (h / g) * splits;
    const float l0 = has_base ? lse[(size_t)h * n + t] : -INFINITY;
    float m = l0;
    for (int s = 0; s < splits; ++s) m = fmaxf(m, part_lse[(size_t)(base + s) * T2_PAGED_ROWS + row]);
    bf16 *o = att + (size_t)t * nh * d + h * d;
    const float w0 = has_base ? exp2f(l0 - m) : 0.f;
    float acc[4], wsum = w0;
    const int per = d / 32; /* 2 or 4 columns per lane */
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] = i < per && has_base ? w0 * __bfloat162float(o[lane * per + i]) : 0.f;
    for (int s = 0; s < splits; ++s) {
        const size_t pr = (size_t)(base + s) * T2_PAGED_ROWS + row;
        const float w = exp2f(part_lse[pr] - m);
        wsum += w;
#pragma unroll
        for (int i = 0; i < 4; ++i)
            if (i < per) acc[i] += w * part_o[pr * d + lane * per + i];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
        if (i < per) o[lane * per + i] = __float2bfloat16(acc[i] / wsum);
}

extern "C" t2_status t2_paged_merge(void *att, const float *lse, const float *part_o, const float *part_lse,
                                    const int32_t *tok_info, int n, int nh, int nkv, int d, int has_base) {
    T2_REQUIRE(n > 0 && nh > 0 && nkv > 0 && nh % nkv == 0 && (d == 64 || d == 128), "t2_paged_merge(shape)");
    const long warps = (long)n * nh;
    paged_merge_kernel<<<ceil_div(warps * 32, 256), 256, 0, t2_stream>>>((bf16 *)att, lse, part_o, part_lse, tok_info, n, nh,
                                                           nh / nkv, d, has_base);
    T2_LAUNCHED("paged_merge_kernel");
    return t2_ok();
}

/* Deterministic pseudo-random bf16 fill (benchmarks fill KV caches without a prefill). */
__global__ void fill_random_kernel(bf16 *p, size_t count, uint32_t seed, float std) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 16, x *= 0x7feb352du, x ^= x >> 15, x *= 0x846ca68bu, x ^= x >> 16;
        const float u = (x >> 8) * (1.f / 16777216.f);
        p[i] = __float2bfloat16((u - 0.5f) * 3.4641016f * std); /* uniform with the given std */
    }
}

extern "C" t2_status t2_fill_random_bf16(void *p, size_t count, uint32_t seed, float std) {
    if (count == 0) return t2_ok();
    fill_random_kernel<<<1024, 256, 0, t2_stream>>>((bf16 *)p, count, seed, std);
    T2_LAUNCHED("fill_random_kernel");
    return t2_ok();
}
