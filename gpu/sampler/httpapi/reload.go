package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"tau2rl/gpu"
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

type updateFromDiskRequest struct {
	ModelPath        string  `json:"model_path"`
	LoadFormat       *string `json:"load_format"`
	AbortAllRequests bool    `json:"abort_all_requests"`
	WeightVersion    *string `json:"weight_version"`
	FlushCache       *bool   `json:"flush_cache"`
}

// updateWeightsFromDisk is SGLang's POST /update_weights_from_disk. Requests in flight are paused
// at a step boundary and resume on the new weights (their KV recomputed), unless
// abort_all_requests aborts them. The prefix cache is always flushed: its entries were computed
// with the old weights (flush_cache=false is accepted and ignored).
func (s *Server) updateWeightsFromDisk(w http.ResponseWriter, r *http.Request) {
	var req updateFromDiskRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	fail := func(status int, msg string) {
		writeJSON(w, status, map[string]any{"success": false, "message": msg, "num_paused_requests": 0})
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
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": msg, "num_paused_requests": paused})
}

// updateWeightVersion is SGLang's POST /update_weight_version.
func (s *Server) updateWeightVersion(w http.ResponseWriter, r *http.Request) {
	var req struct {
		NewVersion       *string `json:"new_version"`
		AbortAllRequests *bool   `json:"abort_all_requests"`
	}
	if !readJSON(w, r, &req, false) {
		return
	}
	if req.NewVersion == nil || *req.NewVersion == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "message": "new_version is required"})
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
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "Weight version updated to " + *req.NewVersion, "new_version": *req.NewVersion})
}

// vLLM's dev-mode weight transfer with the shared-disk backend: start_weight_update opens a
// session, update_weights loads {"update_info": {"path": …}} (checked, held aside), and
// finish_weight_update swaps it in with the given weight_version.

func (s *Server) startWeightUpdate(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "a weight update is already in progress"})
		return
	}
	s.session, s.staged, s.failed = true, nil, nil
	writeJSON(w, http.StatusOK, map[string]string{"message": "Weight update started"})
}

func (s *Server) updateWeights(w http.ResponseWriter, r *http.Request) {
	var req struct {
		UpdateInfo struct {
			Path string `json:"path"`
		} `json:"update_info"`
	}
	if !readJSON(w, r, &req, false) {
		return
	}
	s.mu.Lock()
	open := s.session
	s.mu.Unlock()
	if !open {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "call /start_weight_update first"})
		return
	}
	s.loadMu.Lock()
	wt, err := s.load(req.UpdateInfo.Path)
	s.loadMu.Unlock()
	if err != nil {
		s.mu.Lock()
		s.failed = append(s.failed, req.UpdateInfo.Path+": "+err.Error())
		s.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "update_weights: " + err.Error() + "; the old weights keep serving"})
		return
	}
	s.mu.Lock()
	s.staged = wt
	s.modelPath = req.UpdateInfo.Path
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"message": "Weights updated"})
}

func (s *Server) finishWeightUpdate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		WeightVersion *string `json:"weight_version"`
	}
	if !readJSON(w, r, &req, true) {
		return
	}
	s.mu.Lock()
	staged, open, failed := s.staged, s.session, s.failed
	s.session, s.staged, s.failed = false, nil, nil
	s.mu.Unlock()
	if !open {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "no weight update in progress"})
		return
	}
	if len(failed) > 0 {
		// A failed load in the session: the served weights are still the old ones, so the
		// version must stay theirs (relabelling would attribute old-policy tokens to the new
		// version). The session ends; the trainer's reloader sees the 400 and retries.
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "update_weights failed in this session (" +
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
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "Weight update finished"})
}
