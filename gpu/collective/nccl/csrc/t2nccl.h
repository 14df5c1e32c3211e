/*
 * t2nccl.h: the C ABI between the Go package tau2rl/gpu/collective/nccl and NCCL.
 *
 * Plain C with no CUDA or NCCL types, so cgo (and `go vet -tags cuda` on a machine without CUDA)
 * needs no CUDA headers; t2nccl.cu, compiled by nvcc against nccl.h, implements it. Every call
 * selects the communicator's device, enqueues on the legacy default stream (the stream every
 * gpu/cuda kernel runs on, so collectives are ordered after the kernels that produced their
 * inputs), waits for completion and returns a t2n_status whose strings are static.
 */
#ifndef T2NCCL_H
#define T2NCCL_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

#define T2N_UNIQUE_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */

typedef struct {
    int code;         /* 0 on success; an ncclResult_t, or 10000 + cudaError_t */
    const char *call; /* the failing expression */
    int line;
    const char *msg;  /* the library's description */
} t2n_status;

/* dtype: 0 = float32, 1 = bfloat16 */
t2n_status t2n_version(int *version);
t2n_status t2n_get_unique_id(char *id /* T2N_UNIQUE_ID_BYTES */);
t2n_status t2n_comm_init(void **comm, int device, int world, int rank, const char *id);
t2n_status t2n_comm_destroy(void *comm, int device);
t2n_status t2n_comm_abort(void *comm, int device);
t2n_status t2n_all_reduce_sum(void *comm, int device, void *buf, size_t count);
t2n_status t2n_reduce_scatter_sum(void *comm, int device, const void *send, void *recv, size_t recvcount);
t2n_status t2n_all_gather(void *comm, int device, const void *send, void *recv, size_t sendcount, int dtype);
t2n_status t2n_broadcast(void *comm, int device, void *buf, size_t count, int dtype, int root);
/* vals: n host doubles, summed over ranks in place through the device scratch (n doubles). */
t2n_status t2n_all_reduce_f64(void *comm, int device, double *vals, int n, void *scratch);
t2n_status t2n_malloc(int device, void **p, size_t bytes);
t2n_status t2n_free(int device, void *p);

#ifdef __cplusplus
}
#endif
#endif
