package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/logs"
)

// Reload modes (the trainer's reload.mode): how new weights reach an SGLang-protocol server.
const (
	// ReloadDisk: POST /update_weights_from_disk with the checkpoint just written (SGLang,
	// vLLM's equivalent, tau2-sampler).
	ReloadDisk = "disk"
	// ReloadIPC: POST /update_weights_from_ipc with the trainer's CUDA IPC export (tau2-sampler
	// on the trainer's GPU only); a failure is an error, never a silent disk reload.
	ReloadIPC = "ipc"
	// ReloadAuto (the default): IPC for a server that reports the trainer's GPU in
	// /model_info's gpu_uuid when the trainer's backend can export; the weight-sync group
	// (ReloadDistributed) for a tau2-sampler elsewhere that lists the trainer's sync backend in
	// /model_info's weight_sync, when the trainer has one; disk for every other one.
	ReloadAuto = "auto"
	// ReloadDistributed: every server joins the trainer's weight-sync group and takes each
	// version by a broadcast from the trainer's rank 0 (POST /init_weights_update_group, POST
	// /update_weights_from_distributed; weightsync.go); a failure is an error, never a silent disk
	// reload.
	ReloadDistributed = "distributed"
)

// ValidateReloadMode reports a mode that is not one of the four.
func ValidateReloadMode(mode string) error {
	switch mode {
	case ReloadDisk, ReloadIPC, ReloadAuto, ReloadDistributed:
		return nil
	}
	return fmt.Errorf("reload.mode %q: want %s, %s, %s or %s", mode, ReloadDisk, ReloadIPC, ReloadAuto, ReloadDistributed)
}

// IPCSource exports the trainer's current weights as the body of /update_weights_from_ipc
// (handle, device, tensors, total_bytes; the reloader sets weight_version and flush_cache). It
// returns an error when the trainer's backend cannot export (the cpu one, several GPUs).
type IPCSource func() (protocol.UpdateWeightsFromIPCRequest, error)

// IPCReloader sends the trainer's weights to a tau2-sampler on the same GPU through tau2rl's POST
// /update_weights_from_ipc: the checkpoint path is not used, so a reload needs no checkpoint.
type IPCReloader struct {
	ep  *Endpoint
	src IPCSource
}

// NewIPCReloader returns a reloader for the tau2-sampler at ep.
func NewIPCReloader(ep *Endpoint, src IPCSource) *IPCReloader { return &IPCReloader{ep: ep, src: src} }

// LoadWeights implements Reloader; path is ignored.
func (r *IPCReloader) LoadWeights(ctx context.Context, _ string, version int64) error {
	const op = "update_weights"
	req, err := r.src()
	if err != nil {
		return &Error{Endpoint: r.ep.name, Op: op, Kind: ErrRejected, Err: fmt.Errorf("export weights for cuda ipc: %w", err)}
	}
	req.WeightVersion, req.FlushCache = ptr(VersionString(version)), ptr(true)
	body, _ := json.Marshal(req) // always encodes
	return postUpdate(ctx, r.ep, op, "/update_weights_from_ipc", body)
}

// ModeReloader reloads one server by the path reload.mode picks (ReloadDisk, ReloadIPC,
// ReloadAuto). In auto mode the choice is made at the first reload: IPC when src exports and
// the server's GET /model_info reports the same GPU (gpu_uuid, tau2-sampler's additive field),
// disk otherwise; it is logged once per endpoint with the reason. If an IPC update then fails —
// the server answers the endpoint 404 or 501 (a server without it, a sampler whose backend
// cannot), or refuses or fails the update — auto falls back to disk for that reload (when it has
// a checkpoint) and every later one, and says so.
type ModeReloader struct {
	ep   *Endpoint
	mode string
	disk Reloader
	ipc  *IPCReloader
	src  IPCSource
	log  *slog.Logger

	mu     sync.Mutex
	chosen string // ReloadDisk or ReloadIPC once decided
}

// NewModeReloader wraps disk (the server's disk reloader) with mode's choice. src may be nil (a
// backend that cannot export: auto then always uses disk, ipc is refused).
func NewModeReloader(ep *Endpoint, mode string, disk Reloader, src IPCSource, log *slog.Logger) (*ModeReloader, error) {
	if err := ValidateReloadMode(mode); err != nil {
		return nil, err
	}
	if mode == ReloadDistributed {
		// The weight-sync group is the SyncReloader's (WithWeightSync); a server outside it
		// under reload.mode=distributed is refused there.
		mode = ReloadDisk
	}
	if mode == ReloadIPC && src == nil {
		return nil, fmt.Errorf("reload.mode=ipc: the trainer's backend cannot export its weights by CUDA IPC; use reload.mode=disk or auto")
	}
	r := &ModeReloader{ep: ep, mode: mode, disk: disk, src: src, log: logs.OrDiscard(log)}
	if src != nil {
		r.ipc = NewIPCReloader(ep, src)
	}
	switch mode {
	case ReloadDisk:
		r.chosen = ReloadDisk
	case ReloadIPC:
		r.chosen = ReloadIPC
	}
	return r, nil
}

// Chosen is the path in use ("" before an auto reloader's first reload).
func (r *ModeReloader) Chosen() string { r.mu.Lock(); defer r.mu.Unlock(); return r.chosen }

// LoadWeights implements Reloader.
func (r *ModeReloader) LoadWeights(ctx context.Context, path string, version int64) error {
	r.mu.Lock()
	defer r.mu.Unlock() // reloads of one server are serialized anyway (the trainer waits for each)
	if r.chosen == "" {
		r.chosen = r.choose(ctx)
	}
	if r.chosen == ReloadDisk {
		return r.disk.LoadWeights(ctx, path, version)
	}
	err := r.ipc.LoadWeights(ctx, path, version)
	if err == nil || r.mode != ReloadAuto {
		return err
	}
	// auto never leaves training stuck on a path that failed: a server without the endpoint
	// (404, 501), or an IPC update that failed for any other reason (a handle the server could
	// not open, a shape it refused), and this server is reloaded from disk from now on — the
	// trainer then writes a checkpoint for each reload again (ReloadsFromMemory turns false).
	var le *Error
	if errors.As(err, &le) && (le.Status == http.StatusNotFound || le.Status == http.StatusNotImplemented) {
		r.log.Warn("weight reload: the server does not take weights by CUDA IPC; reloading it from disk from now on",
			"endpoint", r.ep.name, "status", le.Status, "err", err)
	} else {
		r.log.Warn("weight reload: the update by CUDA IPC failed; reloading this server from disk from now on (reload.mode=ipc would retry IPC instead)",
			"endpoint", r.ep.name, "version", version, "err", err)
	}
	r.chosen = ReloadDisk
	if path == "" {
		// A version meant for memory only has no checkpoint to load: the servers keep their
		// weights and the next checkpoint reloads them from disk.
		return fmt.Errorf("%w (version %d has no checkpoint to reload from disk instead; the next checkpoint will be)", err, version)
	}
	return r.disk.LoadWeights(ctx, path, version)
}

// choose decides an auto reloader's path, logging it with the reason.
func (r *ModeReloader) choose(ctx context.Context) string {
	disk := func(why string, args ...any) string {
		r.log.Info("weight reload: from disk (checkpoint, /update_weights_from_disk)", append([]any{"endpoint", r.ep.name, "reason", why}, args...)...)
		return ReloadDisk
	}
	if r.src == nil {
		return disk("the trainer's backend cannot export its weights by CUDA IPC")
	}
	req, err := r.src()
	if err != nil {
		return disk("the trainer's backend cannot export its weights by CUDA IPC", "err", err)
	}
	info, why, err := modelInfo(ctx, r.ep)
	if err != nil {
		return disk(why, "err", err)
	}
	switch info.GPUUUID {
	case "":
		return disk("the server reports no gpu_uuid (not a tau2-sampler on a GPU)")
	case req.Device:
	default:
		return disk("the server runs on another GPU", "server_gpu", info.GPUUUID, "trainer_gpu", req.Device)
	}
	r.log.Info("weight reload: by CUDA IPC (/update_weights_from_ipc): the server runs on the trainer's GPU",
		"endpoint", r.ep.name, "gpu", req.Device, "bytes", req.TotalBytes)
	return ReloadIPC
}

// WithReloadMode applies mode to the reloader NewPolicy built: each SGLang-protocol server's
// reloader becomes a ModeReloader over it (tau2-sampler speaks SGLang's protocol). vLLM's have no
// IPC path: they stay as they are under disk and auto, and ipc is refused.
func WithReloadMode(r Reloader, mode string, src IPCSource, log *slog.Logger) (Reloader, error) {
	if err := ValidateReloadMode(mode); err != nil {
		return nil, err
	}
	wrap := func(x Reloader) (Reloader, error) {
		switch x := x.(type) {
		case *SGLangReloader:
			return NewModeReloader(x.ep, mode, x, src, log)
		case *VLLMReloader:
			if mode == ReloadIPC || mode == ReloadDistributed {
				return nil, fmt.Errorf("reload.mode=%s: vLLM servers reload from disk only (reload.mode=disk or auto)", mode)
			}
		}
		return x, nil
	}
	if m, ok := r.(MultiReloader); ok {
		out := make(MultiReloader, len(m))
		for i, x := range m {
			var err error
			if out[i], err = wrap(x); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return wrap(r)
}

// ReloadsFromMemory reports whether this server now takes the weights by CUDA IPC, so a reload
// needs no checkpoint (the trainer's MemoryReloader). An auto reloader decides at its first
// reload, which the trainer makes with a path: at start-up, the weights it starts from
// (model.path, the initial weights it wrote, or the resumed checkpoint), so a server on its GPU takes every later
// version from memory.
func (r *ModeReloader) ReloadsFromMemory() bool { return r.Chosen() == ReloadIPC }

// ReloadsFromMemory reports whether every server reloads from memory (a mix keeps them all on the
// checkpoints, so every server serves the same versions).
func (m MultiReloader) ReloadsFromMemory() bool {
	for _, r := range m {
		if x, ok := r.(interface{ ReloadsFromMemory() bool }); !ok || !x.ReloadsFromMemory() {
			return false
		}
	}
	return len(m) > 0
}
