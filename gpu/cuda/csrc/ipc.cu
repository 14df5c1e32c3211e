/*
 * ipc.cu: CUDA IPC of device memory between two processes on one GPU, and the GPU's identity.
 * The trainer exports its bf16 weight buffer (a cudaMalloc'd allocation, so a legacy IPC handle
 * covers it whole) and a tau2-sampler on the same GPU opens the handle and copies the weights
 * device to device, instead of a safetensors checkpoint written and read back after every step.
 * A handle cannot be opened in the process that made it (CUDA refuses), and it stays valid while
 * the exporting allocation lives. The UUID (the same bytes nvidia-smi prints as GPU-xxxxxxxx-…)
 * says which physical GPU a process runs on whatever CUDA_VISIBLE_DEVICES renumbered.
 * defines: t2_ipc_get_handle, t2_ipc_open, t2_ipc_close, t2_device_uuid
 */
#include "common.cuh"
#include <string.h>

static_assert(sizeof(cudaIpcMemHandle_t) == T2_IPC_HANDLE_BYTES, "cudaIpcMemHandle_t is 64 bytes");

extern "C" t2_status t2_ipc_get_handle(const void *p, unsigned char *handle) {
    T2_REQUIRE(p != NULL && handle != NULL, "t2_ipc_get_handle(p, handle)");
    cudaIpcMemHandle_t h;
    T2_CUDA(cudaIpcGetMemHandle(&h, (void *)p));
    memcpy(handle, &h, sizeof h);
    return t2_ok();
}

extern "C" t2_status t2_ipc_open(const unsigned char *handle, void **p) {
    T2_REQUIRE(p != NULL && handle != NULL, "t2_ipc_open(handle, p)");
    *p = NULL;
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    T2_CUDA(cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess));
    return t2_ok();
}

extern "C" t2_status t2_ipc_close(void *p) {
    if (p != NULL) T2_CUDA(cudaIpcCloseMemHandle(p));
    return t2_ok();
}

extern "C" t2_status t2_device_uuid(int device, unsigned char *uuid) {
    T2_REQUIRE(uuid != NULL, "t2_device_uuid(uuid)");
    cudaDeviceProp prop;
    T2_CUDA(cudaGetDeviceProperties(&prop, device));
    memcpy(uuid, prop.uuid.bytes, 16);
    return t2_ok();
}
