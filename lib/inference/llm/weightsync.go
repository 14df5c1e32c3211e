package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/logs"
)

// The weight-sync group (reload.mode=distributed, and auto's choice for a tau2-sampler on another
// GPU or host; docs/INFERENCE.md §4c): the trainer's rank 0 forms a group with the servers that
// take part (world = 1 + their number, server i its rank i+1 by rank_offset), telling each to
// join by POST /init_weights_update_group while it joins itself; then for every version it POSTs
// /update_weights_from_distributed to each of them concurrently and broadcasts its bf16 weights,
// tensor by tensor in the order of the body's names. A version counts as reloaded only once every
// server has answered success.

// WeightSyncSource is the trainer's rank 0 of weight-sync groups (gpu/weightsync.Trainer).
type WeightSyncSource interface {
	// Backend is the groups' backend (protocol.WeightSyncTCP, WeightSyncNCCL), which a server
	// must list in /model_info's weight_sync to take part.
	Backend() string
	// Listen opens the rendezvous of a new world-rank group.
	Listen(world int) (WeightSyncHost, error)
}

// WeightSyncHost is a group being formed.
type WeightSyncHost interface {
	// Request is the body each server is sent, with its own rank_offset.
	Request() protocol.InitWeightsUpdateGroupRequest
	// Join joins rank 0, concurrently with the servers' joins; ctx bounds the wait.
	Join(ctx context.Context) (WeightSyncGroup, error)
	// Close closes the rendezvous of a group that was not joined.
	Close() error
}

// WeightSyncGroup is rank 0 of a formed group.
type WeightSyncGroup interface {
	// Prepare snapshots the trainer's weights and returns their tensors in broadcast order
	// (names, dtypes, shapes of the update's body).
	Prepare() ([]protocol.IPCTensor, error)
	// Broadcast sends the prepared weights; when ctx ends first the group is closed, which
	// fails the broadcast on every rank.
	Broadcast(ctx context.Context) error
	Close() error
}

// Default time limits of the group: forming it (every server joins) and one update (every tensor
// received and swapped in). A server that is gone, or never joins, fails the reload after them
// instead of blocking the trainer.
const (
	DefaultSyncJoinTimeout   = 60 * time.Second
	DefaultSyncUpdateTimeout = 10 * time.Minute
)

// syncServer is one server of a SyncReloader: its endpoint, the reloader that serves it outside
// the group (a ModeReloader: IPC or disk; a vLLM reloader), and whether it is in the group.
type syncServer struct {
	ep       *Endpoint
	fallback Reloader
	member   bool
}

// SyncReloader reloads the servers of a policy, those that take part in the weight-sync group by
// the group and the others by their own reloader (IPC or disk), all concurrently. In auto mode
// the servers are sorted at the first reload: a server on the trainer's GPU stays with IPC, a
// server that lists the trainer's backend in /model_info's weight_sync joins the group, the rest
// reload from disk; a failed group update moves its servers to disk from then on (reloading them
// from this version's checkpoint when it has one), as a failed IPC update does. In distributed
// mode every server must take part, a failure is returned, and the next reload forms a new group.
type SyncReloader struct {
	mode    string
	src     WeightSyncSource
	ipc     IPCSource
	log     *slog.Logger
	servers []*syncServer

	// JoinTimeout and UpdateTimeout bound forming the group and one update (zero: the defaults
	// DefaultSyncJoinTimeout, DefaultSyncUpdateTimeout).
	JoinTimeout, UpdateTimeout time.Duration

	mu        sync.Mutex
	decided   bool
	group     WeightSyncGroup
	groupName string // the formed group's group_name, which every update names
}

// WithWeightSync applies reload.mode's weight-sync part to the reloader WithReloadMode returned
// (its ModeReloaders, vLLM reloaders). src may be nil (a trainer that cannot broadcast: auto then
// never forms a group, distributed is refused); ipc is the trainer's IPC source (auto keeps a
// server on the trainer's GPU on IPC). Modes disk and ipc return r unchanged.
func WithWeightSync(r Reloader, mode string, src WeightSyncSource, ipc IPCSource, log *slog.Logger) (Reloader, error) {
	if err := ValidateReloadMode(mode); err != nil {
		return nil, err
	}
	if mode == ReloadDistributed && src == nil {
		return nil, fmt.Errorf("reload.mode=distributed: the trainer cannot broadcast its weights (no weight-sync backend); use reload.mode=disk or auto")
	}
	if (mode != ReloadAuto && mode != ReloadDistributed) || src == nil {
		return r, nil
	}
	rs, ok := r.(MultiReloader)
	if !ok {
		rs = MultiReloader{r}
	}
	s := &SyncReloader{mode: mode, src: src, ipc: ipc, log: logs.OrDiscard(log), JoinTimeout: DefaultSyncJoinTimeout, UpdateTimeout: DefaultSyncUpdateTimeout}
	for _, x := range rs {
		var ep *Endpoint
		switch x := x.(type) {
		case *ModeReloader:
			ep = x.ep
		case *SGLangReloader:
			ep = x.ep
		}
		if ep == nil && mode == ReloadDistributed {
			return nil, fmt.Errorf("reload.mode=distributed: %T servers cannot join a tau2rl weight-sync group (only tau2-sampler can); use reload.mode=auto or disk", x)
		}
		s.servers = append(s.servers, &syncServer{ep: ep, fallback: x})
	}
	return s, nil
}

// Members is how many servers take part in the group (0 before the first reload).
func (s *SyncReloader) Members() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, x := range s.servers {
		if x.member {
			n++
		}
	}
	return n
}

// ReloadsFromMemory reports whether every server takes the weights from memory (the group, or
// IPC), so a reload needs no checkpoint. Before the first reload it is false: the trainer's
// first reload carries a checkpoint, and sorts the servers.
func (s *SyncReloader) ReloadsFromMemory() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.decided {
		return false
	}
	for _, x := range s.servers {
		if x.member {
			continue
		}
		m, ok := x.fallback.(interface{ ReloadsFromMemory() bool })
		if !ok || !m.ReloadsFromMemory() {
			return false
		}
	}
	return true
}

// LoadWeights implements Reloader.
func (s *SyncReloader) LoadWeights(ctx context.Context, path string, version int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.decided {
		if err := s.decide(ctx); err != nil {
			return err
		}
		s.decided = true
	}
	var members []*syncServer
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, x := range s.servers {
		if x.member {
			members = append(members, x)
			continue
		}
		wg.Go(func() {
			if err := x.fallback.LoadWeights(ctx, path, version); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	if len(members) > 0 {
		if err := s.update(ctx, members, version); err != nil {
			errs = append(errs, s.failed(ctx, members, path, version, err))
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// failed handles a failed group update: the group is closed (its state is unknown); auto moves
// its servers to their own reloaders (disk) and reloads them from path when there is one.
func (s *SyncReloader) failed(ctx context.Context, members []*syncServer, path string, version int64, err error) error {
	if s.group != nil {
		s.group.Close()
		s.group = nil
	}
	if s.mode != ReloadAuto {
		s.log.Error("weight reload: the weight-sync group update failed; the next reload forms a new group", "version", version, "err", err)
		return err
	}
	s.log.Warn("weight reload: the weight-sync group update failed; reloading its servers from disk from now on (reload.mode=distributed would form a new group instead)",
		"version", version, "servers", len(members), "err", err)
	for _, x := range members {
		x.member = false
	}
	if path == "" {
		return fmt.Errorf("%w (version %d has no checkpoint to reload from disk instead; the next checkpoint will be)", err, version)
	}
	return errors.Join(MultiReloader(slices.Collect(func(yield func(Reloader) bool) {
		for _, x := range members {
			if !yield(x.fallback) {
				return
			}
		}
	})).LoadWeights(ctx, path, version))
}

// decide sorts the servers (auto) or checks that all can take part (distributed), logging each
// choice with its reason.
func (s *SyncReloader) decide(ctx context.Context) error {
	var ipcDevice string
	if s.ipc != nil {
		if req, err := s.ipc(); err == nil {
			ipcDevice = req.Device
		}
	}
	for _, x := range s.servers {
		if x.ep == nil {
			continue // vLLM (auto only)
		}
		why, ok := s.canJoin(ctx, x.ep, ipcDevice)
		if !ok {
			if s.mode == ReloadDistributed {
				return &Error{Endpoint: x.ep.name, Op: "init_weights_update_group", Kind: ErrRejected,
					Err: fmt.Errorf("reload.mode=distributed: the server cannot join the trainer's %s weight-sync group: %s (use reload.mode=auto to reload it another way)", s.src.Backend(), why)}
			}
			s.log.Info("weight reload: not by the weight-sync group", "endpoint", x.ep.name, "reason", why)
			continue
		}
		x.member = true
		s.log.Info("weight reload: by the weight-sync group (/update_weights_from_distributed)", "endpoint", x.ep.name, "backend", s.src.Backend())
	}
	return nil
}

// canJoin reports whether the server at ep takes part, or why not.
func (s *SyncReloader) canJoin(ctx context.Context, ep *Endpoint, ipcDevice string) (string, bool) {
	info, why, err := modelInfo(ctx, ep)
	if err != nil {
		return why + ": " + err.Error(), false
	}
	if s.mode == ReloadAuto && ipcDevice != "" && info.GPUUUID == ipcDevice {
		return "it runs on the trainer's GPU (CUDA IPC)", false
	}
	if !slices.Contains(info.WeightSync, s.src.Backend()) {
		return fmt.Sprintf("its /model_info weight_sync %v does not list %q (not a tau2-sampler, or one built without it)", info.WeightSync, s.src.Backend()), false
	}
	return "", true
}

// update forms the group when there is none, then sends one version to members.
func (s *SyncReloader) update(ctx context.Context, members []*syncServer, version int64) error {
	if s.group == nil {
		g, name, err := s.join(ctx, members)
		if err != nil {
			return err
		}
		s.group, s.groupName = g, name
	}
	ts, err := s.group.Prepare()
	if err != nil {
		return fmt.Errorf("weight sync: %w", err)
	}
	req := protocol.DistributedTensors(s.groupName, ts)
	req.WeightVersion, req.FlushCache = ptr(VersionString(version)), ptr(true)
	limit := cmp.Or(max(s.UpdateTimeout, 0), DefaultSyncUpdateTimeout)
	uctx, cancel := context.WithTimeoutCause(ctx, limit,
		fmt.Errorf("weight sync: the update of version %d took longer than %s", version, limit))
	defer cancel()
	errs := make([]error, len(members)+1)
	var wg sync.WaitGroup
	for i, x := range members {
		wg.Go(func() {
			body, _ := json.Marshal(req)
			if errs[i] = postUpdate(uctx, x.ep, "update_weights", "/update_weights_from_distributed", body); errs[i] != nil {
				cancel() // a server that will not receive fails the broadcast rather than hang it
			}
		})
	}
	wg.Go(func() {
		if errs[len(members)] = s.group.Broadcast(uctx); errs[len(members)] != nil {
			errs[len(members)] = fmt.Errorf("weight sync: version %d: %w", version, errs[len(members)])
		}
	})
	wg.Wait()
	return errors.Join(errs...)
}

// join forms a group of rank 0 and members: the servers are told to join while rank 0 joins, all
// within JoinTimeout.
func (s *SyncReloader) join(ctx context.Context, members []*syncServer) (WeightSyncGroup, string, error) {
	h, err := s.src.Listen(1 + len(members))
	if err != nil {
		return nil, "", fmt.Errorf("weight sync: %w", err)
	}
	limit := cmp.Or(max(s.JoinTimeout, 0), DefaultSyncJoinTimeout)
	jctx, cancel := context.WithTimeoutCause(ctx, limit,
		fmt.Errorf("weight sync: the group of %d servers did not form within %s", len(members), limit))
	defer cancel()
	errs := make([]error, len(members)+1)
	var g WeightSyncGroup
	var wg sync.WaitGroup
	for i, x := range members {
		wg.Go(func() {
			req := h.Request()
			req.RankOffset = 1 + i
			body, _ := json.Marshal(req)
			if errs[i] = postUpdate(jctx, x.ep, "init_weights_update_group", "/init_weights_update_group", body); errs[i] != nil {
				cancel() // rank 0 stops waiting for a server that said no
			}
		})
	}
	wg.Go(func() { g, errs[len(members)] = h.Join(jctx) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if g != nil {
			g.Close()
		}
		h.Close()
		if errors.Is(jctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", context.Cause(jctx), err)
		}
		return nil, "", err
	}
	s.log.Info("weight sync: group formed", "backend", s.src.Backend(), "world", 1+len(members), "address", h.Request().Addr())
	return g, h.Request().GroupName, nil
}
