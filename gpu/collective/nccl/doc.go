// Package nccl is collective.Comm over NVIDIA NCCL, for gpu/dp on several GPUs (build tag cuda;
// cgo links -lnccl -lcudart and the shim csrc/t2nccl.cu, built by `make gpu` into build/).
//
// One Comm per GPU. The ranks of one world share an NCCL unique id: NewHost creates the comms of
// the GPUs one process drives (one goroutine per GPU, since ncclCommInitRank blocks until every
// rank of the world has joined); with several hosts, host 0 makes the id (UniqueID) and serves it
// to the others over TCP (collective.ServeID / collective.FetchID), so no new service is needed.
//
// Every collective runs on the legacy default stream, where gpu/cuda's kernels run, and waits for
// completion, so its inputs are complete when it starts and its outputs when it returns (no
// overlap of communication with compute yet). Buffers are device memory (collective.DeviceBuffer);
// reductions are fp32 sums, all-gather and broadcast also move bf16.
//
// Run with NCCL_NVLS_ENABLE=0: NVLink SHARP (NVLS) multicast buffers are not supported on the
// machines this project uses (the device tool's KINDS.md), and NCCL otherwise tries to set them up
// on NVSwitch systems (H100/H200 HGX) and fails or hangs at init. docs/MULTIGPU.md has the rest of
// the environment (NCCL_DEBUG=WARN, NCCL_SOCKET_IFNAME for several hosts).
package nccl
