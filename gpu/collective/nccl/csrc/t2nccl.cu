/*
 * t2nccl.cu: NCCL collectives for tau2rl/gpu/collective/nccl (see t2nccl.h).
 * Build: nvcc -c t2nccl.cu (gpu/cuda/gpu.mk does it into gpu/collective/nccl/build/libt2nccl.a);
 * link -lnccl -lcudart.
 */
#include "t2nccl.h"
#include <cuda_runtime.h>
#include <nccl.h>
#include <string.h>

static t2n_status ok(void) {
    t2n_status s = {0, NULL, 0, NULL};
    return s;
}

static t2n_status fail(int code, const char *call, int line, const char *msg) {
    t2n_status s = {code, call, line, msg};
    return s;
}

#define T2N_CUDA(x)                                                              \
    do {                                                                         \
        cudaError_t e_ = (x);                                                    \
        if (e_ != cudaSuccess) return fail(10000 + (int)e_, #x, __LINE__, cudaGetErrorString(e_)); \
    } while (0)

#define T2N_NCCL(x)                                                              \
    do {                                                                         \
        ncclResult_t r_ = (x);                                                   \
        if (r_ != ncclSuccess) return fail((int)r_, #x, __LINE__, ncclGetErrorString(r_)); \
    } while (0)

/* finish waits for the collective just enqueued and surfaces asynchronous NCCL errors. */
static t2n_status finish(ncclComm_t comm) {
    T2N_CUDA(cudaStreamSynchronize(0));
    ncclResult_t async;
    T2N_NCCL(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess) return fail((int)async, "ncclCommGetAsyncError", __LINE__, ncclGetErrorString(async));
    return ok();
}

static ncclDataType_t dt(int dtype) { return dtype == 1 ? ncclBfloat16 : ncclFloat32; }

extern "C" t2n_status t2n_version(int *version) {
    T2N_NCCL(ncclGetVersion(version));
    return ok();
}

extern "C" t2n_status t2n_get_unique_id(char *id) {
    ncclUniqueId u;
    T2N_NCCL(ncclGetUniqueId(&u));
    memcpy(id, u.internal, T2N_UNIQUE_ID_BYTES);
    return ok();
}

extern "C" t2n_status t2n_comm_init(void **comm, int device, int world, int rank, const char *id) {
    ncclUniqueId u;
    memcpy(u.internal, id, T2N_UNIQUE_ID_BYTES);
    T2N_CUDA(cudaSetDevice(device));
    ncclComm_t c;
    T2N_NCCL(ncclCommInitRank(&c, world, u, rank));
    *comm = (void *)c;
    return ok();
}

extern "C" t2n_status t2n_comm_destroy(void *comm, int device) {
    T2N_CUDA(cudaSetDevice(device));
    T2N_NCCL(ncclCommDestroy((ncclComm_t)comm));
    return ok();
}

extern "C" t2n_status t2n_comm_abort(void *comm, int device) {
    T2N_CUDA(cudaSetDevice(device));
    T2N_NCCL(ncclCommAbort((ncclComm_t)comm));
    return ok();
}

extern "C" t2n_status t2n_all_reduce_sum(void *comm, int device, void *buf, size_t count) {
    T2N_CUDA(cudaSetDevice(device));
    T2N_NCCL(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, (ncclComm_t)comm, 0));
    return finish((ncclComm_t)comm);
}

extern "C" t2n_status t2n_reduce_scatter_sum(void *comm, int device, const void *send, void *recv, size_t recvcount) {
    T2N_CUDA(cudaSetDevice(device));
    T2N_NCCL(ncclReduceScatter(send, recv, recvcount, ncclFloat32, ncclSum, (ncclComm_t)comm, 0));
    return finish((ncclComm_t)comm);
}

extern "C" t2n_status t2n_all_gather(void *comm, int device, const void *send, void *recv, size_t sendcount, int dtype) {
    T2N_CUDA(cudaSetDevice(device));
    T2N_NCCL(ncclAllGather(send, recv, sendcount, dt(dtype), (ncclComm_t)comm, 0));
    return finish((ncclComm_t)comm);
}

extern "C" t2n_status t2n_broadcast(void *comm, int device, void *buf, size_t count, int dtype, int root) {
    T2N_CUDA(cudaSetDevice(device));
    T2N_NCCL(ncclBroadcast(buf, buf, count, dt(dtype), root, (ncclComm_t)comm, 0));
    return finish((ncclComm_t)comm);
}

extern "C" t2n_status t2n_all_reduce_f64(void *comm, int device, double *vals, int n, void *scratch) {
    T2N_CUDA(cudaSetDevice(device));
    T2N_CUDA(cudaMemcpy(scratch, vals, sizeof(double) * n, cudaMemcpyHostToDevice));
    T2N_NCCL(ncclAllReduce(scratch, scratch, n, ncclFloat64, ncclSum, (ncclComm_t)comm, 0));
    t2n_status s = finish((ncclComm_t)comm);
    if (s.code != 0) return s;
    T2N_CUDA(cudaMemcpy(vals, scratch, sizeof(double) * n, cudaMemcpyDeviceToHost));
    return ok();
}

extern "C" t2n_status t2n_malloc(int device, void **p, size_t bytes) {
    T2N_CUDA(cudaSetDevice(device));
    T2N_CUDA(cudaMalloc(p, bytes));
    return ok();
}

extern "C" t2n_status t2n_free(int device, void *p) {
    T2N_CUDA(cudaSetDevice(device));
    T2N_CUDA(cudaFree(p));
    return ok();
}
