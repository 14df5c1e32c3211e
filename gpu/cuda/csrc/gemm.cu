/*
 * gemm.cu: every GEMM of the library goes through t2_gemm, which runs it one of two ways
 * (t2_set_gemm, Options.GEMM):
 *   - T2_GEMM_CUBLAS (the default): cublasGemmEx, cuBLAS's own heuristic choice per call; the same
 *     algorithm, hence the same bits, on every run.
 *   - T2_GEMM_TUNED: cuBLASLt. The first time a shape is seen, up to T2_GEMM_CANDIDATES of
 *     cuBLASLt's heuristic candidates are timed on the real operands (time_algo: a warm-up and up
 *     to T2_GEMM_TRIALS timed runs each) and the fastest is kept for the context's lifetime: what
 *     autotuners (CUTLASS's profiler, PyTorch's TunableOp) do, because cuBLAS's first choice is
 *     not always the fastest algorithm on Hopper for a model's fixed shapes.
 *
 * Plans are keyed by shape buckets, not exact shapes: the token dimension of a training
 * micro-batch changes from step to step, and timing eight algorithms for every new count would
 * cost more than it saves. A bucket is four per octave (16000 and 16384 tokens share one); a shape
 * other than the one a plan was tuned on reuses the plan's algorithm when cublasLtMatmulAlgoCheck
 * accepts it, and runs cublasGemmEx when it does not.
 *
 * cuBLASLt's heuristics assume 256-byte-aligned operands unless told otherwise, and an algorithm
 * picked under that assumption may fail or misread less aligned ones (the library hands it
 * sub-buffers: one head-row chunk, one vocabulary tile). So each plan is also keyed by its three
 * pointers' alignments (up to 256 bytes), and its heuristic query states them.
 *
 * Timing an accumulating GEMM (beta ≠ 0: the weight gradients) in place would add into the real
 * output several times, so its trials write a scratch buffer of the output's size, allocated for
 * the tuning and freed after; when that allocation fails (a card nearly full) the plan takes
 * cuBLASLt's first candidate untimed. Overwriting GEMMs are timed in place: the caller's run after
 * tuning overwrites whatever the trials wrote. Nothing is timed while a stream is being captured
 * into a CUDA graph (the serving Decoder; it uses T2_GEMM_CUBLAS anyway).
 * defines: t2_gemm, t2_gemm_release (both declared in common.cuh), t2_set_gemm, t2_gemm_report
 */
#include "common.cuh"
#include <cublasLt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T2_GEMM_PLANS 512
#define T2_GEMM_CANDIDATES 8
#define T2_GEMM_TRIALS 3
#define T2_GEMM_LONG_MS 4.f
#define T2_GEMM_SCRATCH_MAX ((size_t)2 << 30) /* bytes; larger accumulating outputs are not timed */

/* A plan: one shape bucket's cuBLASLt descriptors and the algorithm picked for it. */
struct t2_gemm_plan {
    int opa, opb, ctype, accum;   /* key: transposes, output type, beta ≠ 0 */
    int bm, bn, bk;               /* key: shape buckets */
    int aa, ab, ac;               /* key: the operands' alignments in bytes (≤ 256) */
    int m, n, k, lda, ldb, ldc;   /* the exact shape the layouts describe now */
    int tm, tn, tk;               /* the shape the algorithm was picked on */
    int usable;                   /* 0: cuBLASLt had no algorithm, or none ran: cublasGemmEx */
    int shape_ok;                 /* the algorithm accepts the current exact shape */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int candidates, picked;       /* how many were timed, which one won (0 = cuBLASLt's first) */
    float ms_picked, ms_first;    /* mean ms per run of the winner and of candidate 0 */
    long calls;
};

struct t2_gemm_state {
    cublasLtHandle_t lt;
    int nplans, full_warned;
    struct t2_gemm_plan plans[T2_GEMM_PLANS];
};

/* bucket rounds x up to the next of four steps per octave (p, 1.25p, 1.5p, 1.75p, 2p, where p is
 * the power of two at or below x), so token counts a few percent apart share a plan; Qwen3's
 * widths (2048, 4096, 6144, 12288…) are such steps themselves. */
static int bucket(int x) {
    if (x <= 64) return x;
    long p = 1;
    while (p * 2 <= x) p *= 2;
    const long step = p / 4;
    return (int)((x + step - 1) / step * step);
}

/* align_of is the largest power of two ≤ 256 dividing p's address. */
static int align_of(const void *p) {
    const uintptr_t u = (uintptr_t)p;
    int a = 1;
    while (a < 256 && (u & (uintptr_t)(2 * a - 1)) == 0) a *= 2;
    return a;
}

static cudaDataType_t ctype_of(int ctype) { return ctype == T2_OUT_F32 ? CUDA_R_32F : CUDA_R_16BF; }

/* set_layout points a layout at an exact (rows, cols, ld), creating it on first use. */
static t2_status set_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int rows, int cols, int ld) {
    if (*l == NULL) {
        T2_CUBLAS(cublasLtMatrixLayoutCreate(l, t, rows, cols, ld));
        return t2_ok();
    }
    uint64_t r = (uint64_t)rows, c = (uint64_t)cols;
    int64_t l64 = ld;
    T2_CUBLAS(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_ROWS, &r, sizeof(r)));
    T2_CUBLAS(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof(c)));
    T2_CUBLAS(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_LD, &l64, sizeof(l64)));
    return t2_ok();
}

/* shape describes the exact GEMM in p's layouts (column-major, as cuBLAS sees it). */
static t2_status shape(t2_gemm_plan *p, int m, int n, int k, int lda, int ldb, int ldc) {
    t2_status s;
    if ((s = set_layout(&p->la, CUDA_R_16BF, p->opa ? k : m, p->opa ? m : k, lda)).code) return s;
    if ((s = set_layout(&p->lb, CUDA_R_16BF, p->opb ? n : k, p->opb ? k : n, ldb)).code) return s;
    if ((s = set_layout(&p->lc, ctype_of(p->ctype), m, n, ldc)).code) return s;
    p->m = m, p->n = n, p->k = k, p->lda = lda, p->ldb = ldb, p->ldc = ldc;
    return t2_ok();
}

static t2_status gemm_ex(t2_ctx *c, int opa, int opb, int m, int n, int k, const void *a, int lda, const void *b,
                         int ldb, float beta, void *out, int ctype, int ldc) {
    const float alpha = 1.f;
    T2_CUBLAS(cublasGemmEx(c->blas, opa ? CUBLAS_OP_T : CUBLAS_OP_N, opb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                           a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &beta, out, ctype_of(ctype), ldc,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return t2_ok();
}

static cublasStatus_t lt_run(t2_ctx *c, t2_gemm_plan *p, const cublasLtMatmulAlgo_t *algo, const void *a,
                             const void *b, float beta, void *out) {
    const float alpha = 1.f;
    return cublasLtMatmul(c->gemm->lt, p->desc, &alpha, a, p->la, b, p->lb, &beta, out, p->lc, out, p->lc, algo,
                          c->workspace, c->workspace_bytes, t2_stream);
}

/* elapsed runs the algorithm `runs` times between two events and returns the mean ms, or -1 when it
 * fails to launch (some heuristic candidates do on some shapes; they are skipped, not fatal). */
static float elapsed(t2_ctx *c, t2_gemm_plan *p, const cublasLtMatmulAlgo_t *algo, const void *a, const void *b,
                     float beta, void *out, int runs, cudaEvent_t e0, cudaEvent_t e1) {
    cudaEventRecord(e0, t2_stream);
    for (int t = 0; t < runs; ++t)
        if (lt_run(c, p, algo, a, b, beta, out) != CUBLAS_STATUS_SUCCESS) {
            cudaGetLastError(); /* a failed launch must not reach the next kernel's launch check */
            return -1.f;
        }
    cudaEventRecord(e1, t2_stream);
    float ms = -1.f;
    if (cudaEventSynchronize(e1) != cudaSuccess || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) {
        cudaGetLastError();
        return -1.f;
    }
    return ms / runs;
}

/* time_algo is an algorithm's ms per run: one warm-up (which also loads its kernel), then the mean
 * of T2_GEMM_TRIALS runs, or of one where the warm-up took over T2_GEMM_LONG_MS (the LM head's
 * GEMMs: their run-to-run spread is far below the differences between candidates). */
static float time_algo(t2_ctx *c, t2_gemm_plan *p, const cublasLtMatmulAlgo_t *algo, const void *a, const void *b,
                       float beta, void *out, cudaEvent_t e0, cudaEvent_t e1) {
    const float warm = elapsed(c, p, algo, a, b, beta, out, 1, e0, e1);
    if (warm < 0.f) return -1.f;
    return elapsed(c, p, algo, a, b, beta, out, warm > T2_GEMM_LONG_MS ? 1 : T2_GEMM_TRIALS, e0, e1);
}

/* tune fills a new plan's algorithm: cuBLASLt's candidates timed, the fastest kept. */
static t2_status tune(t2_ctx *c, t2_gemm_plan *p, const void *a, const void *b, float beta, void *out) {
    p->tm = p->m, p->tn = p->n, p->tk = p->k;
    cublasLtMatmulPreference_t pref = NULL;
    T2_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t res[T2_GEMM_CANDIDATES];
    int nres = 0;
    cublasStatus_t hs = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &c->workspace_bytes, sizeof(c->workspace_bytes));
    const uint32_t aa = (uint32_t)p->aa, ab = (uint32_t)p->ab, ac = (uint32_t)p->ac;
    if (hs == CUBLAS_STATUS_SUCCESS)
        hs = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof(aa));
    if (hs == CUBLAS_STATUS_SUCCESS)
        hs = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof(ab));
    if (hs == CUBLAS_STATUS_SUCCESS)
        hs = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac, sizeof(ac));
    if (hs == CUBLAS_STATUS_SUCCESS)
        hs = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac, sizeof(ac));
    if (hs == CUBLAS_STATUS_SUCCESS)
        hs = cublasLtMatmulAlgoGetHeuristic(c->gemm->lt, p->desc, p->la, p->lb, p->lc, p->lc, pref,
                                            T2_GEMM_CANDIDATES, res, &nres);
    cublasLtMatmulPreferenceDestroy(pref);
    int valid[T2_GEMM_CANDIDATES], nvalid = 0;
    if (hs == CUBLAS_STATUS_SUCCESS)
        for (int i = 0; i < nres; ++i)
            if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= c->workspace_bytes) valid[nvalid++] = i;
    if (nvalid == 0) { /* no cuBLASLt algorithm for this shape: cublasGemmEx runs it */
        p->usable = 0;
        return t2_ok();
    }
    p->usable = 1, p->shape_ok = 1, p->algo = res[valid[0]].algo, p->picked = 0, p->candidates = 1;
    p->ms_picked = p->ms_first = 0.f;

    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    T2_CUDA(cudaStreamIsCapturing(t2_stream, &cap));
    if (cap != cudaStreamCaptureStatusNone || nvalid == 1) return t2_ok();
    void *target = out, *scratch = NULL;
    if (p->accum) {
        const size_t bytes = (size_t)p->ldc * (size_t)p->n * (p->ctype == T2_OUT_F32 ? 4 : 2);
        if (bytes > T2_GEMM_SCRATCH_MAX || cudaMalloc(&scratch, bytes) != cudaSuccess) {
            cudaGetLastError(); /* clear the failed allocation; take candidate 0 untimed */
            return t2_ok();
        }
        target = scratch;
    }
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaError_t ee = cudaEventCreate(&e0);
    if (ee == cudaSuccess) ee = cudaEventCreate(&e1);
    if (ee == cudaSuccess) {
        float best = -1.f;
        for (int j = 0; j < nvalid; ++j) {
            const float ms = time_algo(c, p, &res[valid[j]].algo, a, b, beta, target, e0, e1);
            if (j == 0) p->ms_first = ms;
            if (ms > 0.f && (best < 0.f || ms < best)) best = ms, p->picked = j, p->algo = res[valid[j]].algo;
        }
        p->candidates = nvalid, p->ms_picked = best;
        if (best < 0.f) p->usable = 0; /* no candidate ran: cublasGemmEx runs the shape */
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (scratch) T2_CUDA(cudaFree(scratch));
    T2_CUDA(ee);
    return t2_ok();
}

/* find returns the plan of the call's bucket, creating (and tuning) it on first use; NULL when the
 * table is full (the call then runs cublasGemmEx). */
static t2_status find(t2_ctx *c, t2_gemm_plan **out, int opa, int opb, int ctype, int accum, int m, int n, int k,
                      int lda, int ldb, int ldc, const void *a, const void *b, float beta, void *dst) {
    t2_gemm_state *g = c->gemm;
    const int bm = bucket(m), bn = bucket(n), bk = bucket(k), aa = align_of(a), ab = align_of(b), ac = align_of(dst);
    *out = NULL;
    for (int i = 0; i < g->nplans; ++i) {
        t2_gemm_plan *p = &g->plans[i];
        if (p->opa == opa && p->opb == opb && p->ctype == ctype && p->accum == accum && p->bm == bm && p->bn == bn &&
            p->bk == bk && p->aa == aa && p->ab == ab && p->ac == ac) {
            if (p->usable && (p->m != m || p->n != n || p->k != k || p->lda != lda || p->ldb != ldb || p->ldc != ldc)) {
                t2_status s = shape(p, m, n, k, lda, ldb, ldc);
                if (s.code) return s;
                cublasLtMatmulHeuristicResult_t r;
                p->shape_ok = cublasLtMatmulAlgoCheck(g->lt, p->desc, p->la, p->lb, p->lc, p->lc, &p->algo, &r) ==
                                  CUBLAS_STATUS_SUCCESS &&
                              r.workspaceSize <= c->workspace_bytes;
            }
            *out = p;
            return t2_ok();
        }
    }
    if (g->nplans == T2_GEMM_PLANS) {
        if (!g->full_warned) fprintf(stderr, "t2cuda: GEMM plan table full (%d shapes); new shapes run cublasGemmEx\n", T2_GEMM_PLANS);
        g->full_warned = 1;
        return t2_ok();
    }
    t2_gemm_plan *p = &g->plans[g->nplans];
    memset(p, 0, sizeof(*p));
    p->opa = opa, p->opb = opb, p->ctype = ctype, p->accum = accum, p->bm = bm, p->bn = bn, p->bk = bk;
    p->aa = aa, p->ab = ab, p->ac = ac;
    T2_CUBLAS(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    g->nplans++; /* owns desc from here: t2_gemm_release destroys it */
    const cublasOperation_t ta = opa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = opb ? CUBLAS_OP_T : CUBLAS_OP_N;
    T2_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    T2_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    t2_status s = shape(p, m, n, k, lda, ldb, ldc);
    if (s.code) return s;
    if ((s = tune(c, p, a, b, beta, dst)).code) return s;
    *out = p;
    return t2_ok();
}

t2_status t2_gemm(t2_ctx *c, int opa, int opb, int m, int n, int k, const void *a, int lda, const void *b, int ldb,
                  float beta, void *out, int ctype, int ldc) {
    if (c->gemm == NULL) return gemm_ex(c, opa, opb, m, n, k, a, lda, b, ldb, beta, out, ctype, ldc);
    t2_gemm_plan *p = NULL;
    t2_status s = find(c, &p, opa, opb, ctype, beta != 0.f, m, n, k, lda, ldb, ldc, a, b, beta, out);
    if (s.code) return s;
    if (p == NULL || !p->usable || !p->shape_ok) return gemm_ex(c, opa, opb, m, n, k, a, lda, b, ldb, beta, out, ctype, ldc);
    p->calls++;
    T2_CUBLAS(lt_run(c, p, &p->algo, a, b, beta, out));
    return t2_ok();
}

void t2_gemm_release(t2_ctx *c) {
    t2_gemm_state *g = c->gemm;
    if (g == NULL) return;
    for (int i = 0; i < g->nplans; ++i) {
        t2_gemm_plan *p = &g->plans[i];
        if (p->la) cublasLtMatrixLayoutDestroy(p->la);
        if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
        if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
        if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    }
    cublasLtDestroy(g->lt);
    free(g);
    c->gemm = NULL;
}

extern "C" t2_status t2_set_gemm(void *ctx, int mode) {
    t2_ctx *c = (t2_ctx *)ctx;
    T2_REQUIRE(c != NULL && (mode == T2_GEMM_CUBLAS || mode == T2_GEMM_TUNED), "t2_set_gemm(mode)");
    if (mode == T2_GEMM_CUBLAS) {
        t2_gemm_release(c);
        return t2_ok();
    }
    if (c->gemm != NULL) return t2_ok();
    t2_gemm_state *g = (t2_gemm_state *)calloc(1, sizeof(t2_gemm_state));
    T2_REQUIRE(g != NULL, "calloc(t2_gemm_state)");
    cublasStatus_t e = cublasLtCreate(&g->lt);
    if (e != CUBLAS_STATUS_SUCCESS) {
        free(g);
        return t2_fail((int)e + 10000, "cublasLtCreate", __FILE__, __LINE__, cublasGetStatusString(e));
    }
    c->gemm = g;
    return t2_ok();
}

/* algo_desc writes an algorithm's configuration (cuBLASLt's ids: algorithm, tile, stages, split-K,
 * cluster shape) for the report. */
static void algo_desc(const cublasLtMatmulAlgo_t *a, char *buf, size_t cap) {
    int id = -1, tile = -1, stages = -1, splitk = -1, cluster = -1;
    size_t w;
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &w);
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w);
#if CUBLAS_VER_MAJOR >= 12
    cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster), &w);
#endif
    snprintf(buf, cap, "algo %d tile %d stages %d splitK %d cluster %d", id, tile, stages, splitk, cluster);
}

extern "C" t2_status t2_gemm_report(void *ctx, char *buf, int cap, int *len) {
    t2_ctx *c = (t2_ctx *)ctx;
    T2_REQUIRE(c != NULL && buf != NULL && cap > 0 && len != NULL, "t2_gemm_report(args)");
    int n = 0;
    buf[0] = 0;
    const t2_gemm_state *g = c->gemm;
    for (int i = 0; g != NULL && i < g->nplans && n < cap; ++i) {
        const t2_gemm_plan *p = &g->plans[i];
        char ad[128] = "cublasGemmEx (no cuBLASLt algorithm)", timing[160] = "untimed";
        if (p->usable) algo_desc(&p->algo, ad, sizeof(ad));
        const double flop = 2.0 * p->tm * (double)p->tn * p->tk;
        if (p->ms_picked > 0.f) {
            int t = snprintf(timing, sizeof(timing), "%.4f ms, %.0f TFLOP/s", p->ms_picked, flop / p->ms_picked / 1e9);
            if (p->ms_first > 0.f)
                snprintf(timing + t, sizeof(timing) - (size_t)t, "; the first candidate %.4f ms, %.0f TFLOP/s",
                         p->ms_first, flop / p->ms_first / 1e9);
            else
                snprintf(timing + t, sizeof(timing) - (size_t)t, "; the first candidate failed to run");
        }
        n += snprintf(buf + n, (size_t)(cap - n),
                      "op %c%c m %d n %d k %d %s (align %d/%d/%d): %ld calls; picked %d of %d (%s); %s\n",
                      p->opa ? 'T' : 'N', p->opb ? 'T' : 'N', p->tm, p->tn, p->tk,
                      p->ctype == T2_OUT_F32 ? "fp32-out" : "bf16-out", p->aa, p->ab, p->ac, p->calls, p->picked,
                      p->candidates, timing, ad);
    }
    *len = n < cap ? n : cap - 1;
    return t2_ok();
}
