// Package httpapi is tau2-sampler's HTTP layer: the wire formats of SGLang (/generate and its
// control endpoints), vLLM (/v1/completions with token-id prompts, the dev-mode reload endpoints)
// and OpenAI chat completions with tools, over a sampler.Engine. The bodies are
// lib/inference/protocol's types, the ones the project's clients (lib/inference/llm) decode;
// docs/SAMPLER.md lists what each endpoint accepts.
//
// Every request is validated before it reaches the engine: malformed JSON, unknown or
// out-of-range token ids, prompts or max_new_tokens past the context, and sampling parameters
// out of range get a 400 with a message that names the field; nothing else is disturbed.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/sampler"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/logs"
)

// maxBody bounds a request body (a 40k-token prompt is well under 1 MiB of JSON).
const maxBody = 32 << 20

// Options configure a Server.
type Options struct {
	// ModelName is the served model name (/v1/models, responses). Default "tau2-sampler".
	ModelName string
	// ModelPath is the checkpoint directory the weights came from (/get_model_info).
	ModelPath string
	// TokenizerPath is reported by /get_model_info.
	TokenizerPath string
	// LoadWeights reads a checkpoint directory; default gpu.LoadWeights. Tests may wrap it.
	LoadWeights func(dir string) (*gpu.Weights, error)
	// Log receives the component's messages; nil discards (lib/logs).
	Log *slog.Logger
	// WeightSyncJoinTimeout bounds POST /init_weights_update_group's join (default
	// DefaultWeightSyncJoinTimeout).
	WeightSyncJoinTimeout time.Duration
}

// Server serves an engine over HTTP.
type Server struct {
	eng  *sampler.Engine
	opts Options
	log  *slog.Logger

	draining atomic.Bool
	inflight atomic.Int64 // generation requests being served (InFlight)

	mu        sync.Mutex // guards the fields below and serializes weight loads
	modelPath string
	session   bool         // a vLLM start_weight_update … finish_weight_update session is open
	staged    *gpu.Weights // weights loaded by /update_weights, applied by /finish_weight_update
	failed    []string     // /update_weights failures of the open session: finish_weight_update refuses to relabel
	loadMu    sync.Mutex
	// gpuUUID is the GPU the decoder runs on when it takes weights by CUDA IPC ("" otherwise):
	// /get_model_info's gpu_uuid, by which a trainer on the same GPU chooses IPC over disk.
	gpuUUID string
	// sync is the trainer's weight-sync group this server joined (weightsync.go).
	sync syncGroup
}

// New returns a server for eng.
func New(eng *sampler.Engine, opts Options) *Server {
	if opts.ModelName == "" {
		opts.ModelName = "tau2-sampler"
	}
	if opts.LoadWeights == nil {
		opts.LoadWeights = gpu.LoadWeights
	}
	opts.Log = logs.OrDiscard(opts.Log)
	s := &Server{eng: eng, opts: opts, log: opts.Log, modelPath: opts.ModelPath}
	if uuid, err := eng.IPCDevice(); err == nil {
		s.gpuUUID = uuid
	} else if !errors.Is(err, gpu.ErrIPCUnsupported) {
		s.log.Warn("GPU UUID unknown: trainers will reload this sampler from disk, not by CUDA IPC", "err", err)
	}
	return s
}

// SetDraining makes health checks answer 503 and new generation requests 503 with Retry-After,
// while requests already in flight finish (SIGTERM's grace period): the listener stays open
// meanwhile, so a client gets a status it retries elsewhere instead of a refused connection.
func (s *Server) SetDraining(v bool) { s.draining.Store(v) }

// InFlight is the number of generation requests being served (admitted past the draining check
// and not yet answered); the binary's drain waits for it to reach zero before closing the listener.
func (s *Server) InFlight() int64 { return s.inflight.Load() }

// drainRetryAfter is the Retry-After (seconds) of a 503 while draining: another replica, or this
// one after its restart, can take the request by then.
const drainRetryAfter = "5"

// refuseDraining answers a request that arrived while draining.
func refuseDraining(w http.ResponseWriter) {
	w.Header().Set("Retry-After", drainRetryAfter)
	writeError(w, http.StatusServiceUnavailable, "the server is shutting down; retry on another replica")
}

// Handler routes every endpoint.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	gen := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			s.inflight.Add(1)
			defer s.inflight.Add(-1)
			if s.draining.Load() {
				refuseDraining(w)
				return
			}
			h(w, r)
		}
	}
	// SGLang.
	mux.HandleFunc("POST /generate", gen(s.generate))
	mux.HandleFunc("PUT /generate", gen(s.generate))
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /health_generate", s.healthGenerate)
	mux.HandleFunc("GET /get_model_info", s.modelInfo)
	mux.HandleFunc("GET /model_info", s.modelInfo)
	mux.HandleFunc("GET /get_server_info", s.serverInfo)
	mux.HandleFunc("GET /server_info", s.serverInfo)
	mux.HandleFunc("POST /abort_request", s.abortRequest)
	mux.HandleFunc("POST /update_weights_from_disk", s.updateWeightsFromDisk)
	mux.HandleFunc("POST /update_weights_from_ipc", s.updateWeightsFromIPC) // tau2rl's own (docs/INFERENCE.md)
	mux.HandleFunc("POST /init_weights_update_group", s.initWeightsUpdateGroup)
	mux.HandleFunc("POST /update_weights_from_distributed", s.updateWeightsFromDistributed)
	mux.HandleFunc("POST /update_weight_version", s.updateWeightVersion)
	mux.HandleFunc("POST /pause_generation", s.pauseGeneration)
	mux.HandleFunc("POST /continue_generation", s.continueGeneration)
	mux.HandleFunc("/flush_cache", s.flushCache)
	// vLLM and OpenAI.
	mux.HandleFunc("POST /v1/completions", gen(s.completions))
	mux.HandleFunc("POST /v1/chat/completions", gen(s.chat))
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /pause", s.vllmPause)
	mux.HandleFunc("POST /resume", s.vllmResume)
	mux.HandleFunc("GET /is_paused", s.isPaused)
	mux.HandleFunc("POST /start_weight_update", s.startWeightUpdate)
	mux.HandleFunc("POST /update_weights", s.updateWeights)
	mux.HandleFunc("POST /finish_weight_update", s.finishWeightUpdate)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) { protocol.WriteJSON(w, status, v) }

// oneChoiceNoStream is the check every generation endpoint makes first: this server answers each
// request with one choice, whole, never streamed. field names n as the request spells it ("n",
// "sampling_params.n"). It returns the refusal, "" for an acceptable request.
func oneChoiceNoStream(stream bool, n *int, field string) string {
	switch {
	case stream:
		return "stream is not supported; send stream=false"
	case n != nil && *n != 1:
		return field + " must be 1"
	}
	return ""
}

// writeError answers in the servers' error shape (protocol.ServerError: SGLang's top-level
// fields and OpenAI's nested error).
func writeError(w http.ResponseWriter, status int, msg string) {
	protocol.WriteServerError(w, status, msg)
}

// readBody reads a request body (at most maxBody); on failure it has answered 400.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "read request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// readJSON decodes a request body into v; on failure it has answered 400.
func readJSON(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	body, ok := readBody(w, r)
	if !ok {
		return false
	}
	if len(body) == 0 && allowEmpty {
		return true
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON request: "+err.Error())
		return false
	}
	return true
}

// submit runs a request and answers engine errors itself (false: answered).
func (s *Server) submit(w http.ResponseWriter, r *http.Request, req sampler.Request) (sampler.Result, bool) {
	res, err := s.eng.Submit(r.Context(), req)
	if err != nil {
		var ie *sampler.InputError
		switch {
		case errors.As(err, &ie):
			writeError(w, http.StatusBadRequest, ie.Msg)
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			// The client is gone; its blocks are freed. Nobody reads this answer.
			writeError(w, 499, "client closed the request")
		default:
			writeError(w, http.StatusServiceUnavailable, err.Error())
		}
		return res, false
	}
	return res, true
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.eng.Done():
		http.Error(w, "engine stopped", http.StatusServiceUnavailable)
		return
	default:
	}
	if s.draining.Load() {
		refuseDraining(w)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// healthGenerate runs a one-token request through the engine, as SGLang's /health_generate.
func (s *Server) healthGenerate(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		refuseDraining(w)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	mc := s.eng.ModelConfig()
	tok := int32(max(0, min(mc.BOSTokenID, mc.VocabSize-1)))
	if _, err := s.eng.Submit(ctx, sampler.Request{ID: "health_generate", Prompt: []int32{tok}, MaxNewTokens: 1,
		Params: gpu.SampleParams{TopP: 1}}); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) currentModelPath() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modelPath
}

func (s *Server) modelInfo(w http.ResponseWriter, r *http.Request) {
	mc := s.eng.ModelConfig()
	st := s.eng.Stats()
	writeJSON(w, http.StatusOK, protocol.ModelInfo{
		ModelPath: s.currentModelPath(), TokenizerPath: s.opts.TokenizerPath, IsGeneration: true,
		WeightVersion: st.Version, ModelType: mc.ModelType, Architectures: mc.Architectures,
		ServedModelName: s.opts.ModelName, ContextLength: s.eng.ContextLength(), GPUUUID: s.gpuUUID,
		WeightSync: s.weightSyncBackends(),
	})
}

func (s *Server) serverInfo(w http.ResponseWriter, r *http.Request) {
	st := s.eng.Stats()
	writeJSON(w, http.StatusOK, map[string]any{
		"model_path": s.currentModelPath(), "served_model_name": s.opts.ModelName, "weight_version": st.Version,
		"context_length": s.eng.ContextLength(), "kv_cache_blocks": st.TotalBlocks, "kv_cache_used_blocks": st.UsedBlocks,
		"prefix_cache_blocks": st.CachedBlocks, "running_requests": st.Running, "queued_requests": st.Waiting,
		"paused": st.Paused, "version": "tau2-sampler",
	})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	m := protocol.NewModel(s.opts.ModelName, "tau2rl", time.Now().Unix())
	m.Root, m.MaxModelLen = s.currentModelPath(), s.eng.ContextLength()
	writeJSON(w, http.StatusOK, protocol.Models(m))
}

func (s *Server) abortRequest(w http.ResponseWriter, r *http.Request) {
	var req protocol.AbortRequest
	if !readJSON(w, r, &req, true) {
		return
	}
	if req.Rid == nil && !req.AbortAll {
		writeError(w, http.StatusBadRequest, "abort_request needs rid or abort_all")
		return
	}
	id := ""
	if req.Rid != nil {
		id = *req.Rid
	}
	n, err := s.eng.Abort(r.Context(), id, req.AbortAll, "aborted by /abort_request")
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "num_aborted": n})
}

func (s *Server) pauseGeneration(w http.ResponseWriter, r *http.Request) {
	var req protocol.PauseGenerationRequest
	if !readJSON(w, r, &req, true) {
		return
	}
	mode := req.Mode
	switch mode {
	case "":
		mode = sampler.PauseAbort
	case sampler.PauseAbort, sampler.PauseRetract, sampler.PauseInPlace:
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("mode %q: want abort, retract or in_place", req.Mode))
		return
	}
	if err := s.eng.Pause(r.Context(), mode); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, protocol.ControlResponse{Message: "Generation paused successfully.", Status: "ok"})
}

func (s *Server) continueGeneration(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	if !readJSON(w, r, &req, true) {
		return
	}
	if err := s.eng.Resume(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, protocol.ControlResponse{Message: "Generation continued successfully.", Status: "ok"})
}

func (s *Server) flushCache(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "use GET or POST")
		return
	}
	if err := s.eng.FlushCache(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	_, _ = io.WriteString(w, "Cache flushed.\n")
}

func (s *Server) vllmPause(w http.ResponseWriter, r *http.Request) {
	mode := r.URL.Query().Get("mode")
	switch mode {
	case "", "abort":
		mode = sampler.PauseAbort
	case "wait":
		mode = sampler.PauseWait
	case "keep":
		mode = sampler.PauseInPlace
	default:
		writeJSON(w, http.StatusBadRequest, protocol.ControlResponse{Error: fmt.Sprintf("mode %q: want abort, wait or keep", mode)})
		return
	}
	if err := s.eng.Pause(r.Context(), mode); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, protocol.ControlResponse{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, protocol.ControlResponse{Status: "paused"})
}

func (s *Server) vllmResume(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.Resume(r.Context()); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, protocol.ControlResponse{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, protocol.ControlResponse{Status: "resumed"})
}

func (s *Server) isPaused(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, protocol.IsPausedResponse{IsPaused: s.eng.Stats().Paused})
}
