package llmtest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/logs"
	"tau2rl/lib/loopback"
)

// Option configures a Server.
type Option func(*Server)

// WithAddr listens on addr (default "127.0.0.1:0", a free loopback port); it
// must be a loopback address (see lib/loopback).
func WithAddr(addr string) Option { return func(s *Server) { s.addr = addr } }

// WithModel sets the served model name (default "scripted-qwen3").
func WithModel(name string) Option { return func(s *Server) { s.model = name } }

// WithWeightVersion sets the initial weight version (default "0").
func WithWeightVersion(v string) Option { return func(s *Server) { s.version = v } }

// WithLogger logs each request at debug level and script errors at warn.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = logs.OrDiscard(l) } }

// FaultKind is an injected failure.
type FaultKind int

// Fault kinds.
const (
	FaultStatus      FaultKind = iota // answer with an HTTP error status
	FaultDelay                        // wait, then answer normally
	FaultDrop                         // close the connection without answering
	FaultMalformed                    // answer 200 with a body that is not JSON
	FaultReflectAuth                  // answer an HTTP error status quoting the request's Authorization header
)

type fault struct {
	kind   FaultKind
	status int
	delay  time.Duration
}

// Server is the scripted inference server.
type Server struct {
	// URL is the server root, e.g. http://127.0.0.1:41234. Chat clients use
	// URL+"/v1" as their base URL.
	URL string

	tok    *tokenizer.Tokenizer
	script Script
	addr   string
	model  string
	log    *slog.Logger
	imEnd  int32

	ln  net.Listener
	srv *http.Server

	mu        sync.Mutex
	seq       int
	faults    []fault
	latency   time.Duration
	unhealthy bool
	version   string
	modelPath string
	counts    map[string]int
	ipcGPU    string // ServeIPC: the GPU UUID /model_info reports; "" = no IPC endpoint
	vllm      struct {
		paused, updating bool
		path             string
	}
}

// NewServer starts a server answering with script; Close stops it.
func NewServer(tok *tokenizer.Tokenizer, script Script, opts ...Option) (*Server, error) {
	if tok == nil || script == nil {
		return nil, errors.New("llmtest: nil tokenizer or script")
	}
	s := &Server{tok: tok, script: script, addr: "127.0.0.1:0", model: "scripted-qwen3", version: "0",
		counts: map[string]int{}, log: logs.OrDiscard(nil)}
	for _, o := range opts {
		o(s)
	}
	id, ok := tok.AddedTokenID(chattemplate.IMEnd)
	if !ok {
		return nil, errors.New("llmtest: tokenizer has no <|im_end|>")
	}
	s.imEnd = id
	// The weight-update endpoints change the server's state without authentication: loopback only.
	if _, err := loopback.Port(s.addr); err != nil {
		return nil, fmt.Errorf("llmtest: %w", err)
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("llmtest: listen %s: %w", s.addr, err)
	}
	s.ln = ln
	s.URL = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("llmtest: serve", "err", err)
		}
	}()
	return s, nil
}

// Close stops the server and closes open connections.
func (s *Server) Close() error { return s.srv.Close() }

// Shutdown stops the server gracefully.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// FailNext makes the next n requests answer with HTTP status (e.g. 500,
// 503 or 429; a 429 carries "Retry-After: 0").
func (s *Server) FailNext(n, status int) { s.push(n, fault{kind: FaultStatus, status: status}) }

// ReflectAuthNext makes the next n requests answer with HTTP status and an
// error body that quotes the request's Authorization header, as some proxies
// and gateways do: what the clients' credential redaction (lib/redact) is for.
func (s *Server) ReflectAuthNext(n, status int) {
	s.push(n, fault{kind: FaultReflectAuth, status: status})
}

// DelayNext delays the next n requests by d before answering normally.
func (s *Server) DelayNext(n int, d time.Duration) { s.push(n, fault{kind: FaultDelay, delay: d}) }

// DropNext makes the next n requests lose their connection unanswered.
func (s *Server) DropNext(n int) { s.push(n, fault{kind: FaultDrop}) }

// MalformNext makes the next n requests answer 200 with invalid JSON.
func (s *Server) MalformNext(n int) { s.push(n, fault{kind: FaultMalformed}) }

func (s *Server) push(n int, f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults = append(s.faults, f)
	}
}

// SetLatency delays every request by d (0 to stop).
func (s *Server) SetLatency(d time.Duration) { s.mu.Lock(); s.latency = d; s.mu.Unlock() }

// ServeIPC makes the server behave like a tau2-sampler on GPU gpuUUID: /model_info reports it as
// gpu_uuid and POST /update_weights_from_ipc accepts a valid request for that GPU (recording
// its weight_version; there are no weights to copy). Without it the endpoint answers 404, as
// SGLang and vLLM do, and gpu_uuid is absent.
func (s *Server) ServeIPC(gpuUUID string) { s.mu.Lock(); s.ipcGPU = gpuUUID; s.mu.Unlock() }

// SetHealthy switches /health between 200 and 503.
func (s *Server) SetHealthy(ok bool) { s.mu.Lock(); s.unhealthy = !ok; s.mu.Unlock() }

// WeightVersion is the version the server reports (meta_info.weight_version).
func (s *Server) WeightVersion() string { s.mu.Lock(); defer s.mu.Unlock(); return s.version }

// ModelPath is the checkpoint path of the last weight update ("" if none).
func (s *Server) ModelPath() string { s.mu.Lock(); defer s.mu.Unlock(); return s.modelPath }

// Requests counts the requests received on path (faulty ones included).
func (s *Server) Requests(path string) int { s.mu.Lock(); defer s.mu.Unlock(); return s.counts[path] }

// Handler returns the server's routes, for mounting elsewhere.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /health_generate", s.health)
	mux.HandleFunc("GET /model_info", s.modelInfo)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.withFaults(s.chat))
	mux.HandleFunc("POST /generate", s.withFaults(s.generate))
	mux.HandleFunc("PUT /generate", s.withFaults(s.generate))
	mux.HandleFunc("POST /v1/completions", s.withFaults(s.completions))
	mux.HandleFunc("POST /update_weights_from_disk", s.withFaults(s.updateWeightsFromDisk))
	mux.HandleFunc("POST /update_weights_from_ipc", s.withFaults(s.updateWeightsFromIPC))
	for _, p := range []string{"/pause", "/resume", "/start_weight_update", "/update_weights", "/finish_weight_update"} {
		mux.HandleFunc("POST "+p, s.withFaults(s.vllmReload))
	}
	mux.HandleFunc("GET /is_paused", s.isPaused)
	return mux
}

// withFaults counts the request and applies the next queued fault and the
// constant latency.
func (s *Server) withFaults(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[r.URL.Path]++
		var f *fault
		if len(s.faults) > 0 {
			f = &s.faults[0]
			s.faults = s.faults[1:]
		}
		latency := s.latency
		s.mu.Unlock()
		s.log.Debug("llmtest: request", "method", r.Method, "path", r.URL.Path)
		if latency > 0 && !sleep(r.Context(), latency) {
			return
		}
		if f != nil {
			switch f.kind {
			case FaultStatus:
				if f.status == http.StatusTooManyRequests {
					w.Header().Set("Retry-After", "0")
				}
				writeError(w, f.status, "injected fault")
				return
			case FaultReflectAuth:
				writeError(w, f.status, "invalid credentials: the request carried Authorization: "+r.Header.Get("Authorization"))
				return
			case FaultDelay:
				if !sleep(r.Context(), f.delay) {
					return
				}
			case FaultDrop:
				if hj, ok := w.(http.Hijacker); ok {
					if conn, _, err := hj.Hijack(); err == nil {
						conn.Close()
						return
					}
				}
				panic(http.ErrAbortHandler) // net/http closes the connection
			case FaultMalformed:
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"id": "broken", "choices": [`)
				return
			}
		}
		h(w, r)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) { protocol.WriteJSON(w, status, v) }

// writeError answers in the inference servers' error shape (protocol.ServerError: SGLang's
// top-level fields and OpenAI's nested error), as tau2-sampler does.
func writeError(w http.ResponseWriter, status int, msg string) {
	protocol.WriteServerError(w, status, msg)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	bad := s.unhealthy
	s.mu.Unlock()
	if bad {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) modelInfo(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, protocol.ModelInfo{ModelPath: s.modelPath, IsGeneration: true, WeightVersion: s.version,
		ModelType: "qwen3", Architectures: []string{"Qwen3ForCausalLM"}, GPUUUID: s.ipcGPU})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, protocol.Models(protocol.NewModel(s.model, "llmtest", 0)))
}

// Logprob is the deterministic pseudo log-probability the server reports
// for token id at output position pos of a completion whose prompt has
// promptLen tokens: a value in [-2, 0).
func Logprob(promptLen, pos int, id int32) float32 {
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(promptLen))
	binary.LittleEndian.PutUint32(b[4:], uint32(pos))
	binary.LittleEndian.PutUint32(b[8:], uint32(id))
	h.Write(b[:12])
	return -float32(h.Sum64()%2000+1) / 1000
}

// generation is a scripted completion in tokens.
type generation struct {
	ids     []int32 // output ids, including the stop token when finished by stop
	logp    []float32
	finish  string // "stop" or "length"
	matched int32  // stop token id, -1 for length
	version string
}

// complete asks the script and turns its reply into tokens, honouring the
// token budget and extra stop token ids.
func (s *Server) complete(ctx context.Context, call *Call, stopIDs []int32) (generation, error) {
	s.mu.Lock()
	s.seq++
	call.Seq = s.seq
	version := s.version
	s.mu.Unlock()
	reply, err := s.script.Reply(ctx, call)
	if err != nil {
		s.log.Warn("llmtest: script error", "seq", call.Seq, "err", err)
		return generation{}, err
	}
	text, err := reply.Text(call.ThinkingOff)
	if err != nil {
		return generation{}, err
	}
	ids := append(s.tok.Encode(text), s.imEnd)
	g := generation{finish: "stop", matched: s.imEnd, version: version}
	for i, id := range ids[:len(ids)-1] {
		if slices.Contains(stopIDs, id) {
			ids, g.matched = ids[:i+1], id
			break
		}
	}
	if call.MaxTokens > 0 && len(ids) > call.MaxTokens {
		ids, g.finish, g.matched = ids[:call.MaxTokens], "length", -1
	}
	g.ids = ids
	g.logp = make([]float32, len(ids))
	for i, id := range ids {
		g.logp[i] = Logprob(len(call.PromptIDs), i, id)
	}
	return g, nil
}

// tokenCall builds a Call from a token prompt, reading the conversation back
// from the Qwen3 markup when there is one.
func (s *Server) tokenCall(api API, r *http.Request, body []byte, ids []int32) (*Call, error) {
	text, err := s.tok.Decode(ids)
	if err != nil {
		return nil, err
	}
	call := &Call{API: api, PromptIDs: ids, PromptText: text, Header: r.Header, Body: body}
	if rendered, err := chattemplate.ParseRendered(text); err == nil {
		call.Messages, call.Tools = rendered.Messages, rendered.Tools
		call.ThinkingOff = rendered.OpenAssistant && strings.HasPrefix(rendered.AssistantPrefix, chattemplate.EmptyThink)
	}
	return call, nil
}

// parseIDs reads a single prompt of token ids from field (protocol.TokenIDs), checking them
// against the vocabulary.
func (s *Server) parseIDs(field string, raw json.RawMessage) ([]int32, error) {
	ids, err := protocol.TokenIDs(field, raw)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if _, ok := s.tok.TokenBytes(id); !ok {
			return nil, fmt.Errorf("%s[%d]: token id %d is out of vocabulary", field, i, id)
		}
	}
	return ids, nil
}

// logprobs widens a generation's log-probs for encoding (protocol clamps them).
func (g generation) logprobs() []float64 {
	out := make([]float64, len(g.logp))
	for i, lp := range g.logp {
		out[i] = float64(lp)
	}
	return out
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return nil, false
	}
	return b, true
}
