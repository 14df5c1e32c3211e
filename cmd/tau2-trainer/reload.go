package main

import (
	"fmt"
	"log/slog"
	"sync"

	"tau2rl/cmd/internal/cli"
	"tau2rl/gpu"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/protocol"
)

// ipcSource exports be's weights by CUDA IPC for reload.mode ipc/auto (nil when be cannot export
// at all): the cuda backend's bf16 working weights, on its own GPU.
func ipcSource(be gpu.Backend) llm.IPCSource {
	if _, ok := be.(gpu.IPCExporter); !ok {
		return nil
	}
	// One export at a time: the servers are reloaded in parallel (llm.MultiReloader), and a
	// Backend is not safe for concurrent use (the training goroutine waits meanwhile).
	var mu sync.Mutex
	return func() (protocol.UpdateWeightsFromIPCRequest, error) {
		mu.Lock()
		defer mu.Unlock()
		x, err := gpu.ExportWeights(be)
		if err != nil {
			return protocol.UpdateWeightsFromIPCRequest{}, err
		}
		return ipcRequest(x), nil
	}
}

// ipcRequest is x as the body of /update_weights_from_ipc (without weight_version).
func ipcRequest(x gpu.IPCExport) protocol.UpdateWeightsFromIPCRequest {
	ts := make([]protocol.IPCTensor, len(x.Tensors))
	for i, t := range x.Tensors {
		shape := make([]int64, len(t.Shape))
		for j, d := range t.Shape {
			shape[j] = int64(d)
		}
		ts[i] = protocol.IPCTensor{Name: t.Name, DType: string(t.DType), Shape: shape, OffsetBytes: t.Offset}
	}
	return protocol.NewUpdateWeightsFromIPC(x.Handle, x.Device, ts, x.TotalBytes)
}

// withReloadMode applies reload.mode to the servers' reloader. reload.mode=ipc is checked here,
// before training starts: a backend that cannot export is a configuration error, not a reload
// failing after the first step.
func withReloadMode(r llm.Reloader, mode string, be gpu.Backend, log *slog.Logger) (llm.Reloader, error) {
	src := ipcSource(be)
	if mode == llm.ReloadIPC {
		if src == nil {
			return nil, fmt.Errorf("%w: reload.mode=ipc: %T: %v", cli.ErrUsage, be, gpu.ErrIPCUnsupported)
		}
		if _, err := src(); err != nil {
			return nil, fmt.Errorf("%w: reload.mode=ipc: %v", cli.ErrUsage, err)
		}
	}
	out, err := llm.WithReloadMode(r, mode, src, log)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	return out, nil
}
