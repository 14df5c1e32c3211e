package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"tau2rl/cmd/internal/cli"
	"tau2rl/gpu"
	"tau2rl/gpu/weightsync"
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

// validate checks the sync keys (the backend's availability is checked at start-up, with the
// trainer's backend: withWeightSync).
func (c SyncConfig) validate(mode string) error {
	switch c.Backend {
	case "auto", "off", protocol.WeightSyncTCP, protocol.WeightSyncNCCL:
	default:
		return fmt.Errorf("reload.sync.backend %q: want auto, nccl, tcp or off", c.Backend)
	}
	if c.Backend == "off" && mode == llm.ReloadDistributed {
		return errors.New("reload.mode=distributed needs reload.sync.backend (auto, nccl or tcp), not off")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("reload.sync.listen %q: want host:port (port 0 for any): %v", c.Listen, err)
	}
	if c.JoinTimeout < 0 || c.UpdateTimeout < 0 {
		return errors.New("reload.sync.join_timeout and update_timeout must be ≥ 0")
	}
	return nil
}

// weightSyncSource is rank 0 of the weight-sync group over be's weights, or nil when the
// configuration or the backend rules it out (auto then reloads those servers another way).
// backend auto: nccl over the cuda backend's device buffer when this binary has NCCL; the host hub
// over the weights be hands back (gpu.WeightExporter) for the pure-Go backend (pureGo) only — the
// hub is a star over gob meant for CPU-sized models, and at GPU sizes its traffic per version
// (world × the model through one process) would cost more than a checkpoint on local disk, so a
// data-parallel cuda group stays on disk unless reload.sync.backend=tcp asks for the hub.
//
// nccl says whether backend auto may pick NCCL: only when reload.mode=distributed asks for the
// group. Under reload.mode=auto — every trainer's default — the NCCL group is not chosen by
// itself: it has not yet run on GPUs (no machine of several GPUs was lent when it was written;
// docs/OPERATIONS.md), so a one-host layout's samplers on other GPUs reload from disk until a
// user opts in with reload.mode=distributed or reload.sync.backend=nccl.
func weightSyncSource(c SyncConfig, be gpu.Backend, pureGo bool, device int, nccl bool) (llm.WeightSyncSource, error) {
	backend := c.Backend
	dw, onDevice := be.(weightsync.DeviceWeights)
	hw, onHost := be.(gpu.WeightExporter)
	if backend == "auto" {
		switch {
		case onDevice && weightsync.HaveNCCL() && nccl:
			backend = protocol.WeightSyncNCCL
		case onHost && pureGo:
			backend = protocol.WeightSyncTCP
		default:
			return nil, nil
		}
	}
	var src weightsync.Source
	switch backend {
	case "off":
		return nil, nil
	case protocol.WeightSyncNCCL:
		if !onDevice {
			return nil, fmt.Errorf("reload.sync.backend=nccl: %T keeps no bf16 weight buffer on one GPU (a data-parallel group broadcasts by tcp)", be)
		}
		src = weightsync.DeviceSource(dw)
	case protocol.WeightSyncTCP:
		if !onHost {
			return nil, fmt.Errorf("reload.sync.backend=tcp: %T cannot hand its weights to the host", be)
		}
		src = weightsync.HostSource(hw)
	}
	return weightsync.NewTrainer(backend, c.Listen, c.Address, c.Group, device, src)
}

// withWeightSync applies reload.mode's weight-sync part (distributed, auto) to the reloader.
func withWeightSync(r llm.Reloader, c ReloadConfig, be gpu.Backend, pureGo bool, device int, log *slog.Logger) (llm.Reloader, error) {
	if c.Mode != llm.ReloadDistributed && c.Mode != llm.ReloadAuto {
		return r, nil
	}
	src, err := weightSyncSource(c.Sync, be, pureGo, device, c.Mode == llm.ReloadDistributed)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if src == nil && c.Mode == llm.ReloadDistributed {
		return nil, fmt.Errorf("%w: reload.mode=distributed: %T cannot broadcast its weights (reload.sync.backend %s)", cli.ErrUsage, be, c.Sync.Backend)
	}
	out, err := llm.WithWeightSync(r, c.Mode, src, ipcSource(be), log)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if s, ok := out.(*llm.SyncReloader); ok {
		s.JoinTimeout, s.UpdateTimeout = c.Sync.JoinTimeout, c.Sync.UpdateTimeout
	}
	return out, nil
}
