/*
 * context.cu: device selection, memory, copies, the cuBLAS handle and timing events.
 * defines: t2_init, t2_destroy, t2_set_device, t2_malloc, t2_free, t2_memset, t2_h2d, t2_d2h,
 *          t2_d2d, t2_sync, t2_mem_info, t2_device_name, t2_device_count, t2_event_time, t2_event_create,
 *          t2_event_destroy, t2_event_record, t2_event_elapsed, t2_stream_create, t2_stream_destroy,
 *          t2_use_stream, t2_graph_begin, t2_graph_end, t2_graph_abort, t2_graph_launch, t2_graph_destroy
 */
#include "common.cuh"
#include <string.h>
#include <stdlib.h>

cudaStream_t t2_stream = 0;

/* ---- streams and graphs (the serving Decoder: one graph per step shape, replayed) ---- */
extern "C" t2_status t2_stream_create(void **s) {
    cudaStream_t st;
    T2_CUDA(cudaStreamCreate(&st)); /* blocking: ordered with the legacy stream's copies */
    *s = st;
    return t2_ok();
}

extern "C" t2_status t2_stream_destroy(void *s) {
    if (s != NULL) T2_CUDA(cudaStreamDestroy((cudaStream_t)s));
    return t2_ok();
}

extern "C" t2_status t2_use_stream(void *ctx, void *s) {
    t2_stream = (cudaStream_t)s;
    if (ctx != NULL) T2_CUBLAS(cublasSetStream(((t2_ctx *)ctx)->blas, (cudaStream_t)s));
    return t2_ok();
}

extern "C" t2_status t2_graph_begin(void *s) {
    T2_CUDA(cudaStreamBeginCapture((cudaStream_t)s, cudaStreamCaptureModeRelaxed));
    return t2_ok();
}

extern "C" t2_status t2_graph_end(void *s, void **exec) {
    cudaGraph_t g = NULL;
    *exec = NULL;
    T2_CUDA(cudaStreamEndCapture((cudaStream_t)s, &g));
    cudaGraphExec_t e = NULL;
    cudaError_t err = cudaGraphInstantiate(&e, g, 0);
    cudaGraphDestroy(g);
    T2_CUDA(err);
    *exec = e;
    return t2_ok();
}

extern "C" t2_status t2_graph_abort(void *s) {
    cudaGraph_t g = NULL;
    cudaStreamEndCapture((cudaStream_t)s, &g);
    if (g != NULL) cudaGraphDestroy(g);
    cudaGetLastError();
    return t2_ok();
}

extern "C" t2_status t2_graph_launch(void *exec, void *s) {
    T2_CUDA(cudaGraphLaunch((cudaGraphExec_t)exec, (cudaStream_t)s));
    return t2_ok();
}

extern "C" t2_status t2_graph_destroy(void *exec) {
    if (exec != NULL) T2_CUDA(cudaGraphExecDestroy((cudaGraphExec_t)exec));
    return t2_ok();
}

extern "C" t2_status t2_init(int device, void **out) {
    T2_REQUIRE(out != NULL, "t2_init(out)");
    *out = NULL;
    T2_CUDA(cudaSetDevice(device));
    t2_ctx *c = (t2_ctx *)calloc(1, sizeof(t2_ctx));
    T2_REQUIRE(c != NULL, "calloc(t2_ctx)");
    c->device = device;
    c->workspace_bytes = (size_t)32 << 20; /* 32 MiB, as llm.c; Hopper kernels want a workspace */
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        free(c);
        return t2_fail((int)bs + 10000, "cublasCreate(&c->blas)", __FILE__, __LINE__, cublasGetStatusString(bs));
    }
    cudaError_t e = cudaMalloc(&c->workspace, c->workspace_bytes);
    if (e != cudaSuccess) {
        cublasDestroy(c->blas);
        free(c);
        return t2_fail((int)e, "cudaMalloc(&c->workspace)", __FILE__, __LINE__, cudaGetErrorString(e));
    }
    *out = c;
    T2_CUBLAS(cublasSetWorkspace(c->blas, c->workspace, c->workspace_bytes));
    T2_CUBLAS(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    T2_CUDA(cudaEventCreate(&c->ev_start));
    T2_CUDA(cudaEventCreate(&c->ev_stop));
    return t2_ok();
}

extern "C" t2_status t2_destroy(void *ctx) {
    t2_ctx *c = (t2_ctx *)ctx;
    if (c == NULL) return t2_ok();
    T2_CUDA(cudaSetDevice(c->device));
    T2_CUDA(cudaDeviceSynchronize());
    if (c->ev_start) T2_CUDA(cudaEventDestroy(c->ev_start));
    if (c->ev_stop) T2_CUDA(cudaEventDestroy(c->ev_stop));
    t2_gemm_release(c);
    T2_CUBLAS(cublasDestroy(c->blas));
    T2_CUDA(cudaFree(c->workspace));
    free(c);
    return t2_ok();
}

extern "C" t2_status t2_set_device(int device) {
    T2_CUDA(cudaSetDevice(device));
    return t2_ok();
}

extern "C" t2_status t2_malloc(void **p, size_t bytes) {
    T2_REQUIRE(p != NULL, "t2_malloc(p)");
    *p = NULL;
    if (bytes == 0) return t2_ok();
    T2_CUDA(cudaMalloc(p, bytes));
    return t2_ok();
}

extern "C" t2_status t2_free(void *p) {
    if (p != NULL) T2_CUDA(cudaFree(p));
    return t2_ok();
}

extern "C" t2_status t2_memset(void *p, int value, size_t bytes) {
    if (bytes == 0) return t2_ok();
    T2_CUDA(cudaMemsetAsync(p, value, bytes, 0));
    return t2_ok();
}

extern "C" t2_status t2_h2d(void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return t2_ok();
    T2_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return t2_ok();
}

extern "C" t2_status t2_d2h(void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return t2_ok();
    T2_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return t2_ok();
}

extern "C" t2_status t2_d2d(void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return t2_ok();
    T2_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0));
    return t2_ok();
}

extern "C" t2_status t2_sync(void) {
    T2_CUDA(cudaDeviceSynchronize());
    T2_CUDA(cudaGetLastError());
    return t2_ok();
}

extern "C" t2_status t2_mem_info(size_t *free_bytes, size_t *total_bytes) {
    T2_CUDA(cudaMemGetInfo(free_bytes, total_bytes));
    return t2_ok();
}

extern "C" t2_status t2_device_name(int device, char *buf, int len, int *sms) {
    cudaDeviceProp p;
    T2_CUDA(cudaGetDeviceProperties(&p, device));
    if (len > 0) {
        strncpy(buf, p.name, (size_t)len - 1);
        buf[len - 1] = 0;
    }
    *sms = p.multiProcessorCount;
    return t2_ok();
}

extern "C" t2_status t2_device_count(int *n) {
    *n = 0;
    cudaError_t e = cudaGetDeviceCount(n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        cudaGetLastError(); /* clear it: no device is an answer (0), not a failure */
        *n = 0;
        return t2_ok();
    }
    T2_CUDA(e);
    return t2_ok();
}

extern "C" t2_status t2_event_time(void *ctx, int record, float *ms) {
    t2_ctx *c = (t2_ctx *)ctx;
    if (record) {
        T2_CUDA(cudaEventRecord(c->ev_start, 0));
        return t2_ok();
    }
    T2_CUDA(cudaEventRecord(c->ev_stop, 0));
    T2_CUDA(cudaEventSynchronize(c->ev_stop));
    T2_CUDA(cudaEventElapsedTime(ms, c->ev_start, c->ev_stop));
    return t2_ok();
}

/* Loose events for the per-operation profiler (profile.go): created once, recorded on the default
 * stream around each operation, read after the host synchronizes. */
extern "C" t2_status t2_event_create(void **ev) {
    cudaEvent_t e;
    T2_CUDA(cudaEventCreate(&e));
    *ev = (void *)e;
    return t2_ok();
}

extern "C" t2_status t2_event_destroy(void *ev) {
    T2_CUDA(cudaEventDestroy((cudaEvent_t)ev));
    return t2_ok();
}

extern "C" t2_status t2_event_record(void *ev) {
    T2_CUDA(cudaEventRecord((cudaEvent_t)ev, 0));
    return t2_ok();
}

extern "C" t2_status t2_event_elapsed(void *start, void *stop, float *ms) {
    T2_CUDA(cudaEventSynchronize((cudaEvent_t)stop));
    T2_CUDA(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)stop));
    return t2_ok();
}
