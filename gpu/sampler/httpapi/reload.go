package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"tau2rl/gpu"
	"tau2rl/lib/inference/protocol"
)

// Weight reloads. A checkpoint is read and checked completely (config, every tensor's presence,
// shape and finiteness, the architecture against the served model) while the engine keeps
// generating; only then does the engine swap it in between two steps. A malformed or mismatched
// checkpoint is rejected with the reason and the old weights keep serving.

// load reads and checks a checkpoint directory against the served model.
func (s *Server) load(dir string) (*gpu.Weights, error) {
	if dir == "" {
		return nil, fmt.Errorf("empty checkpoint path")
	}
	w, err := s.opts.LoadWeights(dir)
	if err != nil {
		return nil, err
	}
	if err := gpu.SameArchitecture(s.eng.ModelConfig(), w.Config); err != nil {
		return nil, fmt.Errorf("checkpoint %s does not fit the served model: %w", dir, err)
	}
	return w, nil
}

// updateWeightsFromDisk is SGLang's POST /update_weights_from_disk. Requests in flight are paused
// at a step boundary and resume on the new weights (their KV recomputed), unless
// abort_all_requests aborts them. The prefix cache is always flushed: its entries were computed
// with the old weights (flush_cache=false is accepted and ignored).
func (s *Server) updateWeightsFromDisk(w http.ResponseWriter, r *http.Request) {
	var req protocol.UpdateWeightsFromDiskRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	fail := func(status int, msg string) {
		writeJSON(w, status, protocol.UpdateWeightsResponse{Success: new(bool), Message: msg, NumPausedRequests: 0})
	}
	if req.LoadFormat != nil {
		switch *req.LoadFormat {
		case "", "auto", "safetensors":
		default:
			fail(http.StatusBadRequest, fmt.Sprintf("load_format %q is not supported (safetensors only)", *req.LoadFormat))
			return
		}
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	wt, err := s.load(req.ModelPath)
	if err != nil {
		fail(http.StatusBadRequest, "Failed to update weights: "+err.Error()+". The old weights keep serving.")
		return
	}
	version := ""
	if req.WeightVersion != nil {
		version = *req.WeightVersion
	}
	paused := s.eng.Stats().Running
	if err := s.eng.SwapWeights(r.Context(), wt, version, req.AbortAllRequests); err != nil {
		fail(http.StatusBadRequest, "Failed to update weights: "+err.Error()+". The old weights keep serving.")
		return
	}
	s.mu.Lock()
	s.modelPath = req.ModelPath
	s.mu.Unlock()
	msg := "Succeeded to update model weights."
	if version != "" {
		msg += " Weight version updated to " + version + "."
	}
	s.log.Info("weights updated", "path", req.ModelPath, "version", s.eng.Stats().Version)
	ok := true
	writeJSON(w, http.StatusOK, protocol.UpdateWeightsResponse{Success: &ok, Message: msg, NumPausedRequests: paused})
}

// updateWeightVersion is SGLang's POST /update_weight_version.
func (s *Server) updateWeightVersion(w http.ResponseWriter, r *http.Request) {
	var req protocol.UpdateWeightVersionRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	if req.NewVersion == nil || *req.NewVersion == "" {
		writeJSON(w, http.StatusBadRequest, protocol.UpdateWeightVersionResponse{Message: "new_version is required"})
		return
	}
	if req.AbortAllRequests == nil || *req.AbortAllRequests {
		if _, err := s.eng.Abort(r.Context(), "", true, "aborted by a weight version update"); err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
	}
	if err := s.eng.SetVersion(r.Context(), *req.NewVersion); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, protocol.UpdateWeightVersionResponse{Success: true, Message: "Weight version updated to " + *req.NewVersion, NewVersion: *req.NewVersion})
}

// vLLM's dev-mode weight transfer with the shared-disk backend: start_weight_update opens a
// session, update_weights loads {"update_info": {"path": …}} (checked, held aside), and
// finish_weight_update swaps it in with the given weight_version.

func (s *Server) startWeightUpdate(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session {
		writeJSON(w, http.StatusBadRequest, protocol.ControlResponse{Error: "a weight update is already in progress"})
		return
	}
	s.session, s.staged, s.failed = true, nil, nil
	writeJSON(w, http.StatusOK, protocol.ControlResponse{Message: "Weight update started"})
}

func (s *Server) updateWeights(w http.ResponseWriter, r *http.Request) {
	var req protocol.VLLMUpdateWeightsRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	s.mu.Lock()
	open := s.session
	s.mu.Unlock()
	if !open {
		writeJSON(w, http.StatusBadRequest, protocol.ControlResponse{Error: "call /start_weight_update first"})
		return
	}
	s.loadMu.Lock()
	wt, err := s.load(req.UpdateInfo.Path)
	s.loadMu.Unlock()
	if err != nil {
		s.mu.Lock()
		s.failed = append(s.failed, req.UpdateInfo.Path+": "+err.Error())
		s.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, protocol.ControlResponse{Error: "update_weights: " + err.Error() + "; the old weights keep serving"})
		return
	}
	s.mu.Lock()
	s.staged = wt
	s.modelPath = req.UpdateInfo.Path
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, protocol.ControlResponse{Message: "Weights updated"})
}

func (s *Server) finishWeightUpdate(w http.ResponseWriter, r *http.Request) {
	var req protocol.FinishWeightUpdateRequest
	if !readJSON(w, r, &req, true) {
		return
	}
	s.mu.Lock()
	staged, open, failed := s.staged, s.session, s.failed
	s.session, s.staged, s.failed = false, nil, nil
	s.mu.Unlock()
	if !open {
		writeJSON(w, http.StatusBadRequest, protocol.ControlResponse{Error: "no weight update in progress"})
		return
	}
	if len(failed) > 0 {
		// A failed load in the session: the served weights are still the old ones, so the
		// version must stay theirs (relabelling would attribute old-policy tokens to the new
		// version). The session ends; the trainer's reloader sees the 400 and retries.
		writeJSON(w, http.StatusBadRequest, protocol.ControlResponse{Error: "update_weights failed in this session (" +
			strings.Join(failed, "; ") + "); the old weights and their weight version keep serving"})
		return
	}
	version := ""
	if req.WeightVersion != nil {
		version = *req.WeightVersion
	}
	var err error
	if staged != nil {
		s.loadMu.Lock()
		err = s.eng.SwapWeights(r.Context(), staged, version, false)
		s.loadMu.Unlock()
	} else if version != "" {
		err = s.eng.SetVersion(r.Context(), version)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, protocol.ControlResponse{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, protocol.ControlResponse{Message: "Weight update finished"})
}

// updateWeightsFromIPC is tau2rl's POST /update_weights_from_ipc (docs/INFERENCE.md): the
// trainer on the same GPU sends the CUDA IPC handle of its bf16 weight buffer and the tensors in
// it; the decoder maps the buffer (once per handle) and copies the tensors device to device
// between two steps, under the same pause/retract/version discipline as a reload from disk. A
// backend that cannot (cpu) answers 501 naming the disk path; a malformed request or one that
// does not fit the served model (names, shapes, dtype, another GPU) 400, with the old weights
// and their version still serving.
func (s *Server) updateWeightsFromIPC(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		writeJSON(w, status, protocol.UpdateWeightsResponse{Success: new(bool), Message: msg, NumPausedRequests: 0})
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	if _, err := s.eng.IPCDevice(); err != nil {
		fail(http.StatusNotImplemented, "this tau2-sampler cannot take weights by CUDA IPC ("+err.Error()+
			"); reload it from a checkpoint with POST /update_weights_from_disk (the trainer's reload.mode=disk)")
		return
	}
	req, handle, err := protocol.DecodeUpdateWeightsFromIPCRequest(body)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	x := gpu.IPCExport{Handle: handle, Device: req.Device, TotalBytes: req.TotalBytes, Tensors: make([]gpu.IPCTensor, len(req.Tensors))}
	for i, t := range req.Tensors {
		shape := make([]int, len(t.Shape))
		for j, d := range t.Shape {
			shape[j] = int(d)
		}
		x.Tensors[i] = gpu.IPCTensor{Name: t.Name, DType: gpu.DType(t.DType), Shape: shape, Offset: t.OffsetBytes}
	}
	version := ""
	if req.WeightVersion != nil {
		version = *req.WeightVersion
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	paused := s.eng.Stats().Running
	took, err := s.eng.SwapWeightsIPC(r.Context(), x, version, req.AbortAllRequests)
	if err != nil {
		fail(http.StatusBadRequest, "Failed to update weights by CUDA IPC: "+err.Error()+". The old weights keep serving.")
		return
	}
	ms := float64(took.Microseconds()) / 1000
	s.log.Info("weights updated by cuda ipc", "device", req.Device, "bytes", req.TotalBytes, "version", s.eng.Stats().Version, "ms", ms)
	msg := fmt.Sprintf("Succeeded to update model weights by CUDA IPC in %.1f ms.", ms)
	if version != "" {
		msg += " Weight version updated to " + version + "."
	}
	ok = true
	writeJSON(w, http.StatusOK, protocol.UpdateWeightsResponse{Success: &ok, Message: msg, NumPausedRequests: paused})
}
