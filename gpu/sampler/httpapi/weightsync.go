package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/weightsync"
	"tau2rl/lib/inference/protocol"
)

// The weight-sync group (docs/INFERENCE.md §4c): SGLang's POST /init_weights_update_group and
// POST /update_weights_from_distributed over tau2rl's rendezvous (gpu/weightsync). The server
// joins rank rank_offset of the trainer's group and keeps the communicator; an update receives
// every tensor into a staging buffer while the engine keeps generating, then swaps it in between
// two steps under the same pause/retract/version discipline as a reload from disk. What does not
// fit the served model is refused before anything is received, and the server then leaves the
// group, so the trainer's broadcast fails at once instead of waiting for a rank that will not
// take part; a broadcast that fails part way (the trainer or another server gone) leaves the old
// weights and their version serving, and the group too is left (the trainer forms a new one).

// DefaultWeightSyncJoinTimeout bounds a join when Options.WeightSyncJoinTimeout is zero.
const DefaultWeightSyncJoinTimeout = 60 * time.Second

// syncGroup is the server's membership of a trainer's weight-sync group.
type syncGroup struct {
	mu      sync.Mutex // serializes joins and updates
	comm    collective.Comm
	req     protocol.InitWeightsUpdateGroupRequest
	staging weightsync.HostStaging
}

// leave closes the communicator (callers hold mu).
func (g *syncGroup) leave() {
	if g.comm != nil {
		g.comm.Close()
		g.comm = nil
	}
}

// weightSyncBackends are the backends this server can join by (model_info's weight_sync): the
// host hub always (any decoder takes host weights), NCCL when the build has it and the decoder
// stages on its device.
func (s *Server) weightSyncBackends() []string {
	out := []string{protocol.WeightSyncTCP}
	if _, ok := s.eng.Decoder().(weightsync.DeviceStager); ok && weightsync.HaveNCCL() {
		out = append(out, protocol.WeightSyncNCCL)
	}
	return out
}

func syncFail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, protocol.UpdateWeightsResponse{Success: new(bool), Message: msg, NumPausedRequests: 0})
}

// initWeightsUpdateGroup is POST /init_weights_update_group: it answers once this server has
// joined, or could not within the join timeout. A previous group is left first.
func (s *Server) initWeightsUpdateGroup(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	req, err := protocol.DecodeInitWeightsUpdateGroupRequest(body)
	if err != nil {
		syncFail(w, http.StatusBadRequest, err.Error())
		return
	}
	if !slices.Contains(s.weightSyncBackends(), req.Backend) {
		syncFail(w, http.StatusBadRequest, fmt.Sprintf("this tau2-sampler joins weight-sync groups by %v, not %q (nccl needs the cuda build and backend)", s.weightSyncBackends(), req.Backend))
		return
	}
	g := &s.sync
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leave()
	device := 0
	if st, ok := s.eng.Decoder().(weightsync.DeviceStager); ok {
		device = st.DeviceOrdinal()
	}
	timeout := s.opts.WeightSyncJoinTimeout
	if timeout <= 0 {
		timeout = DefaultWeightSyncJoinTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	t0 := time.Now()
	c, err := weightsync.Join(ctx, req, device)
	if err != nil {
		syncFail(w, http.StatusBadRequest, fmt.Sprintf("Failed to join weight-sync group %q at %s as rank %d of %d within %s: %v",
			req.GroupName, req.Addr(), req.RankOffset, req.WorldSize, timeout, err))
		return
	}
	g.comm, g.req = c, req
	s.log.Info("joined the weight-sync group", "group", req.GroupName, "backend", req.Backend, "address", req.Addr(),
		"rank", req.RankOffset, "world", req.WorldSize, "seconds", time.Since(t0).Seconds())
	ok = true
	writeJSON(w, http.StatusOK, protocol.UpdateWeightsResponse{Success: &ok, Message: "Succeeded to initialize the weight-sync group."})
}

// updateWeightsFromDistributed is POST /update_weights_from_distributed.
func (s *Server) updateWeightsFromDistributed(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	g := &s.sync
	g.mu.Lock()
	defer g.mu.Unlock()
	// refuse answers a request this server will not receive, leaving the group so that the
	// trainer's broadcast fails instead of waiting for this rank.
	refuse := func(status int, msg string) {
		if g.comm != nil {
			g.leave()
			msg += "; this server left the weight-sync group (the trainer forms a new one)"
		}
		syncFail(w, status, msg+". The old weights keep serving.")
	}
	req, err := protocol.DecodeUpdateWeightsFromDistributedRequest(body)
	if err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	if g.comm == nil {
		syncFail(w, http.StatusBadRequest, "this server is in no weight-sync group: POST /init_weights_update_group first. The old weights keep serving.")
		return
	}
	if req.GroupName != g.req.GroupName {
		refuse(http.StatusBadRequest, fmt.Sprintf("group_name %q: this server is in group %q", req.GroupName, g.req.GroupName))
		return
	}
	pts, _ := req.Tensors() // validated by the decode
	ts, total := weightsync.Packed(weightsync.Tensors(pts))
	cfg := s.eng.ModelConfig()
	if err := weightsync.Check(cfg, ts, total); err != nil {
		refuse(http.StatusBadRequest, "the tensors do not fit the served model: "+err.Error())
		return
	}
	version := ""
	if req.WeightVersion != nil {
		version = *req.WeightVersion
	}
	// A trainer that goes away mid-broadcast (its request ends) must not leave this rank
	// waiting in the collective: leaving the group fails it.
	comm := g.comm
	stop := context.AfterFunc(r.Context(), func() { comm.Close() })
	defer stop()
	t0 := time.Now()
	var load func(gpu.Decoder) error
	var staging collective.Buffer
	stager, device := s.eng.Decoder().(weightsync.DeviceStager)
	if g.req.Backend == protocol.WeightSyncNCCL && device {
		p, err := stager.StagingBuffer(total)
		if err != nil {
			refuse(http.StatusInternalServerError, "staging buffer: "+err.Error())
			return
		}
		staging = collective.DeviceBuffer(p, int(total/2), collective.BF16)
		load = func(gpu.Decoder) error { return stager.LoadWeightsStaged(ts, total) }
	} else {
		staging = g.staging.Buffer(total)
	}
	if err := weightsync.Receive(g.comm, staging, ts); err != nil {
		g.leave()
		syncFail(w, http.StatusBadRequest, "Failed to receive the weights: "+err.Error()+
			"; this server left the weight-sync group (the trainer forms a new one). The old weights keep serving.")
		return
	}
	recv := time.Since(t0)
	if load == nil {
		wt, err := g.staging.Weights(cfg, ts)
		if err != nil {
			syncFail(w, http.StatusBadRequest, "Failed to update weights: "+err.Error()+". The old weights keep serving.")
			return
		}
		load = func(d gpu.Decoder) error { return d.LoadWeights(wt) }
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	paused := s.eng.Stats().Running
	took, err := s.eng.SwapWeightsWith(r.Context(), "distributed", load, version, req.AbortAllRequests)
	if err != nil {
		syncFail(w, http.StatusBadRequest, "Failed to update weights: "+err.Error()+". The old weights keep serving.")
		return
	}
	s.log.Info("weights updated by the weight-sync group", "group", g.req.GroupName, "bytes", total, "version", s.eng.Stats().Version,
		"receive_ms", float64(recv.Microseconds())/1000, "swap_ms", float64(took.Microseconds())/1000)
	msg := fmt.Sprintf("Succeeded to update model weights by the weight-sync group (received in %.1f ms, swapped in %.1f ms).",
		float64(recv.Microseconds())/1000, float64(took.Microseconds())/1000)
	if version != "" {
		msg += " Weight version updated to " + version + "."
	}
	ok = true
	writeJSON(w, http.StatusOK, protocol.UpdateWeightsResponse{Success: &ok, Message: msg, NumPausedRequests: paused})
}
