/*
 * attention_impl.h: the FlashAttention-2-style kernels of attention_fa2.cu and the Hopper ones of
 * attention_sm90_fwd.cu and attention_sm90_bwd.cu, called by the public t2_attention_fwd /
 * t2_attention_bwd of attention.cu for T2_ATT_FA2, T2_ATT_FA2_DET and T2_ATT_HOPPER. Same arguments as
 * those (blockmax holds the per-64-key maxima followed by the minima of subtree_end, see
 * t2_tree_blockmax); Di is rowsum(dout∘out), already computed by t2_attention_bwd.
 */
#pragma once
#include "t2cuda.h"
#include <stddef.h>

/* Where t2_tree_blockmax's launch orders start in its output, in int32 elements: after the
 * ceil(n/64) maxima and as many minima come the forward's order of its ceil(n/128) query blocks
 * (backward = 0), then the backward's of its key blocks (backward = 1). */
static inline size_t t2_work_order_at(int n, int backward) {
    return 2 * (size_t)((n + 63) / 64) + (backward ? (size_t)((n + 127) / 128) : 0);
}

t2_status t2_attention_fwd_fa2(void *out, float *lse, const void *q, const void *k, const void *v, int q_stride,
                               int k_stride, int v_stride, const int32_t *subtree_end, const int32_t *blockmax,
                               int n, int nh, int nkv, int d);
/* attention_sm90_fwd.cu: the warp-specialized TMA/wgmma forward of T2_ATT_HOPPER (same arguments as
 * t2_attention_fwd_fa2). */
t2_status t2_attention_fwd_sm90(void *out, float *lse, const void *q, const void *k, const void *v, int q_stride,
                                int k_stride, int v_stride, const int32_t *subtree_end, const int32_t *blockmax,
                                int n, int nh, int nkv, int d);
/* attention_sm90_bwd.cu: the wgmma backward of T2_ATT_HOPPER: dK, dV and dQ (added into dq by TMA
 * reductions; dq zeroed here), Di = rowsum(dout∘out) as for t2_attention_bwd_fa2. */
t2_status t2_attention_bwd_sm90(float *dq, void *dk, int dk_stride, void *dv, int dv_stride, const float *Di,
                                const void *dout, const float *lse, const void *q, const void *k, const void *v,
                                int q_stride, int k_stride, int v_stride, const int32_t *subtree_end,
                                const int32_t *blockmax, int n, int nh, int nkv, int d);
/* dq: fp32 [n, nh·d]; atomic_dq: 1 for the atomic dQ (T2_ATT_FA2), 0 for the deterministic separate
 * dQ pass (T2_ATT_FA2_DET). */
t2_status t2_attention_bwd_fa2(float *dq, int atomic_dq, void *dk, int dk_stride, void *dv, int dv_stride,
                               const float *Di, const void *dout, const float *lse, const void *q, const void *k,
                               const void *v, int q_stride, int k_stride, int v_stride, const int32_t *subtree_end,
                               const int32_t *blockmax, int n, int nh, int nkv, int d);
