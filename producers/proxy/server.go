package proxy

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/logs"
	"tau2rl/lib/uuid"
	"tau2rl/producers/rollout"
	"tau2rl/schemas"
)

// Deps are the proxy's collaborators.
type Deps struct {
	// Policy is the token-mode policy client (llm.NewPolicy).
	Policy llm.Policy
	// Tokenizer is Qwen3's.
	Tokenizer *tokenizer.Tokenizer
	// Trajectories and InfraErrors publish framed messages and return once
	// they are acknowledged (*kafka.Writer).
	Trajectories rollout.Publisher
	InfraErrors  rollout.Publisher
	// Version returns the latest policy version known (for tokens whose
	// server version is unknown, and Trajectory.PolicyVersionStart); nil
	// means 0.
	Version func() int64
	// APIKeys are the accepted keys (nil with auth disabled).
	APIKeys map[string]bool
	Metrics *Metrics
	// Log receives the component's messages; nil discards (lib/logs).
	Log *slog.Logger
}

// Server is the capture proxy.
type Server struct {
	cfg   Config
	d     Deps
	m     *Metrics
	log   *slog.Logger
	tok   *tokenizer.Tokenizer
	stops []int32 // <|im_end|>, <|endoftext|>
	// maxTokenBytes is the longest token's text, in bytes (128 for Qwen3):
	// text of n bytes is at least n/maxTokenBytes tokens.
	maxTokenBytes int
	sem           *semaphore.Weighted

	prefixes chattemplate.PrefixCache
	intern   internCache

	mu       sync.Mutex
	sessions map[string]*session
	ended    map[string]endedSession
	closing  bool
}

// endedSession is what is remembered of a session after it ended.
type endedSession struct {
	outcome      string
	trajectoryID string
	at           time.Time
}

// New builds a proxy.
func New(cfg Config, d Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Policy == nil || d.Tokenizer == nil || d.Trajectories == nil || d.InfraErrors == nil {
		return nil, errors.New("proxy: Policy, Tokenizer, Trajectories and InfraErrors are required")
	}
	if !cfg.Auth.Disabled && len(d.APIKeys) == 0 {
		return nil, errors.New("proxy: auth is enabled but no API key was given")
	}
	if d.Metrics == nil {
		d.Metrics, _ = NewMetrics(nil) // a nil registry registers nothing, so cannot clash
	}
	d.Log = logs.OrDiscard(d.Log)
	s := &Server{cfg: cfg, d: d, m: d.Metrics, log: d.Log, tok: d.Tokenizer,
		sem: semaphore.NewWeighted(int64(cfg.Limits.MaxConcurrentCalls)), sessions: map[string]*session{}, ended: map[string]endedSession{}}
	s.prefixes.Max = cfg.Limits.MaxPrefixes
	s.intern.textJoin, _ = cfg.textJoin() // Validate checked it
	for _, t := range []string{chattemplate.IMEnd, "<|endoftext|>"} {
		if id, ok := d.Tokenizer.AddedTokenID(t); ok {
			s.stops = append(s.stops, id)
		}
	}
	if len(s.stops) == 0 {
		return nil, fmt.Errorf("proxy: tokenizer has no %s token", chattemplate.IMEnd)
	}
	s.maxTokenBytes = longestToken(d.Tokenizer)
	return s, nil
}

// Handler is the HTTP API: OpenAI's /v1/chat/completions, /v1/responses and
// /v1/models, and the session API under /v1/sessions/. Every answer, errors
// included, is JSON in OpenAI's shape (streams: server-sent events).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.route("chat", http.MethodPost, s.chat))
	mux.HandleFunc("/v1/responses", s.route("responses", http.MethodPost, s.responses))
	mux.HandleFunc("/v1/models", s.route("models", http.MethodGet, s.models))
	mux.HandleFunc("/v1/models/{model}", s.route("models", http.MethodGet, s.models))
	mux.HandleFunc("/v1/sessions/{id}", s.route("session", http.MethodGet, s.getSession))
	mux.HandleFunc("/v1/sessions/{id}/reward", s.route("reward", http.MethodPost, s.setReward))
	mux.HandleFunc("/v1/sessions/{id}/finish", s.route("finish", http.MethodPost, s.finish))
	mux.HandleFunc("/v1/sessions/{id}/abort", s.route("abort", http.MethodPost, s.abort))
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("/", s.route("unknown", "", func(w http.ResponseWriter, r *http.Request) error {
		return &APIError{Status: http.StatusNotFound, Type: errNotFound, Message: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)}
	}))
	return mux
}

// statusWriter remembers the status code for the requests metric.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// route wraps a handler: method check, authentication, request-size
// limit, OpenAI-shaped errors, metrics.
func (s *Server) route(name, method string, h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		w := &statusWriter{ResponseWriter: rw}
		err := func() error {
			if method != "" && r.Method != method {
				w.Header().Set("Allow", method)
				return &APIError{Status: http.StatusMethodNotAllowed, Type: errInvalidRequest, Message: fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, method)}
			}
			if err := s.authenticate(r); err != nil {
				return err
			}
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxRequestBytes)
			return h(w, r)
		}()
		if err != nil {
			ae := asAPIError(err)
			if ae.Status >= 500 {
				s.log.Warn("request failed", "route", name, "status", ae.Status, "err", ae.Message)
			}
			writeAPIError(w, ae)
		}
		s.m.Requests.WithLabelValues(name, strconv.Itoa(w.code)).Inc()
	}
}

func (s *Server) authenticate(r *http.Request) error {
	if s.cfg.Auth.Disabled {
		return nil
	}
	key, _, perr := parseCredentials(r)
	if perr != nil {
		return perr
	}
	ok := 0
	for k := range s.d.APIKeys {
		ok |= subtle.ConstantTimeCompare([]byte(k), []byte(key))
	}
	if key == "" || ok == 0 {
		return &APIError{Status: http.StatusUnauthorized, Type: errAuthentication, Code: "invalid_api_key",
			Message: "Incorrect API key provided. The bearer token is KEY or KEY;session=ID;task=…"}
	}
	return nil
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) error {
	model := protocol.NewModel(s.cfg.Model, "tau2rl", 0)
	if id := r.PathValue("model"); id != "" {
		if id != s.cfg.Model {
			return &APIError{Status: http.StatusNotFound, Type: errInvalidRequest, Code: "model_not_found", Param: "model",
				Message: fmt.Sprintf("The model %q does not exist; this proxy serves %q", id, s.cfg.Model)}
		}
		writeJSON(w, http.StatusOK, model)
		return nil
	}
	writeJSON(w, http.StatusOK, protocol.Models(model))
	return nil
}

// acquire returns the open session meta names, creating it on first use;
// the caller holds it until letGo (deferred), which forgets a session its
// failed first call left empty.
// A session belongs to the API key that opened it: calls and the session
// API with another key are answered as if the session did not exist (404),
// so one key's clients cannot reward or end another's sessions.
func (s *Server) acquire(meta SessionMeta, key string) (*session, error) {
	if meta.ID == "" {
		return nil, &APIError{Status: http.StatusBadRequest, Type: errInvalidRequest, Code: "missing_session",
			Message: "no session: put session=ID in the bearer token (KEY;session=ID;task=…) or send the " + HeaderSession + " header; every call is captured into a session"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.sessions[meta.ID]; ok {
		if sess.owner != key {
			return nil, &APIError{Status: http.StatusConflict, Type: errConflict, Code: "session_taken", Param: "session", Final: true,
				Message: fmt.Sprintf("session %q belongs to another API key", meta.ID)}
		}
		sess.holders++
		return sess, nil
	}
	if e, ok := s.ended[meta.ID]; ok {
		return nil, endedError(meta.ID, e)
	}
	if s.closing {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Type: errServer, Code: "shutting_down", Message: "the proxy is shutting down"}
	}
	if len(s.sessions) >= s.cfg.Limits.MaxSessions {
		return nil, &APIError{Status: http.StatusTooManyRequests, Type: errRateLimit, Code: "too_many_sessions",
			Message: fmt.Sprintf("%d sessions are open (limits.max_sessions); finish some first", len(s.sessions))}
	}
	domain := meta.Domain
	if domain == "" {
		domain = s.cfg.Domain
	}
	if err := schemas.ValidatePathComponent(domain); err != nil {
		return nil, badRequest("", "session domain: %v", err)
	}
	task := meta.Task
	if task == "" {
		task = meta.ID
	}
	now := time.Now().UTC()
	sess := &session{meta: meta, owner: key, lastUsed: now, traj: schemas.Trajectory{
		ID: uuid.New(), TaskID: task, Domain: domain, Split: s.cfg.Split, RequestID: meta.Group, Trial: meta.Trial,
		StartedAt: now, AgentModel: s.cfg.Model, Status: schemas.StatusOK,
		Tags: map[string]string{"source": "tau2-proxy", "session": meta.ID},
	}}
	sess.holders = 1
	s.sessions[meta.ID] = sess
	s.m.OpenSessions.Set(float64(len(s.sessions)))
	return sess, nil
}

// letGo ends the hold a handler took on sess with acquire, and forgets the
// session when the last holder leaves it without a recorded call (the
// request that opened it failed: a 400 found once the prompt was rendered,
// a policy server that could not answer). Such a session has nothing to
// publish; kept, it would hold a limits.max_sessions slot for session_ttl
// and then end as an infra-errors record of 0 calls, noise for an episode
// that never started. The id stays free: the next call opens it afresh.
// A session with a recorded call, a reward or a finish under way is kept.
func (s *Server) letGo(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.holders--
	if sess.holders > 0 || s.sessions[sess.meta.ID] != sess {
		return
	}
	sess.mu.Lock()
	unused := sess.phase == phaseOpen && len(sess.calls) == 0 && sess.inflight == 0 && sess.reward == nil
	sess.mu.Unlock()
	if unused {
		delete(s.sessions, sess.meta.ID)
		s.m.OpenSessions.Set(float64(len(s.sessions)))
	}
}

// lookup returns an open session, or the error for an ended or unknown id.
func (s *Server) lookup(r *http.Request) (*session, error) {
	id := r.PathValue("id")
	if id == "" {
		return nil, badRequest("session", "the session id in the path is empty")
	}
	if e := checkID("session", id); e != nil {
		return nil, e
	}
	key := ""
	if !s.cfg.Auth.Disabled {
		key, _, _ = parseCredentials(r) // authenticate already refused malformed ones
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.sessions[id]; ok && sess.owner == key {
		return sess, nil
	}
	if e, ok := s.ended[id]; ok {
		return nil, endedError(id, e)
	}
	return nil, &APIError{Status: http.StatusNotFound, Type: errNotFound, Code: "session_not_found", Param: "session",
		Message: fmt.Sprintf("no session %q (sessions open on their first chat call)", id)}
}

// endedError answers a call, reward, finish or abort naming a session that
// has ended: 410 Gone, final. Not 409: the OpenAI SDKs retry 409 (twice,
// over seconds), and no retry can reopen an ended session.
func endedError(id string, e endedSession) *APIError {
	msg := fmt.Sprintf("session %q has ended (%s)", id, e.outcome)
	if e.trajectoryID != "" {
		msg += "; its trajectory " + e.trajectoryID + " was published"
	}
	msg += "; start a new session id for a new episode"
	return &APIError{Status: http.StatusGone, Type: errInvalidRequest, Code: "session_ended", Param: "session", Final: true, Message: msg}
}

// end moves a session from the open set to the ended set.
func (s *Server) end(id, outcome, trajectoryID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, id)
	s.ended[id] = endedSession{outcome: outcome, trajectoryID: trajectoryID, at: time.Now()}
	s.m.OpenSessions.Set(float64(len(s.sessions)))
	s.m.Sessions.WithLabelValues(outcome).Inc()
}

// OpenSessions is the number of open sessions.
func (s *Server) OpenSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Serve serves the API on ln until ctx ends, expiring idle sessions
// meanwhile. On shutdown it stops accepting calls, waits up to
// shutdown_grace for those in flight, and records every session left open
// on the infra-errors topic (stage proxy_shutdown): nothing captured is
// dropped silently.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	tick := time.NewTicker(max(min(s.cfg.SessionTTL/4, time.Minute), 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case err := <-errc:
			return fmt.Errorf("proxy: serve: %w", err)
		case <-tick.C:
			s.Expire(ctx, time.Now())
		case <-ctx.Done():
			s.mu.Lock()
			s.closing = true
			s.mu.Unlock()
			sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
			defer cancel()
			_ = srv.Shutdown(sctx)
			return s.DropAll(sctx, "proxy_shutdown", "the proxy shut down before the session finished")
		}
	}
}

// Expire ends the sessions idle for longer than session_ttl with an
// infra-errors record (never a trajectory: an unfinished session has no
// reward), and forgets ended ids older than finished_ttl. A record that
// cannot be published leaves its session open for the next round.
func (s *Server) Expire(ctx context.Context, now time.Time) {
	s.mu.Lock()
	var idle []*session
	for _, sess := range s.sessions {
		idle = append(idle, sess)
	}
	for id, e := range s.ended {
		if now.Sub(e.at) > s.cfg.FinishedTTL {
			delete(s.ended, id)
		}
	}
	s.mu.Unlock()
	for _, sess := range idle {
		sess.mu.Lock()
		expired := sess.phase == phaseOpen && sess.inflight == 0 && now.Sub(sess.lastUsed) > s.cfg.SessionTTL
		idleFor := now.Sub(sess.lastUsed).Round(time.Second)
		sess.mu.Unlock()
		if expired {
			msg := fmt.Sprintf("session expired: idle %s (session_ttl %s) without a finish", idleFor, s.cfg.SessionTTL)
			if err := s.drop(ctx, sess, "expired", "proxy_session_expired", msg); err != nil {
				s.log.Warn("session expiry not published; retrying later", "session", sess.meta.ID, "err", err)
			}
		}
	}
}

// DropAll ends every open session with an infra-errors record, published
// in batches (a shutdown with thousands of sessions open must fit in
// shutdown_grace).
func (s *Server) DropAll(ctx context.Context, stage, msg string) error {
	s.mu.Lock()
	var open []*session
	for _, sess := range s.sessions {
		open = append(open, sess)
	}
	s.mu.Unlock()
	var errs []error
	for len(open) > 0 {
		n := min(len(open), dropBatch)
		if err := s.dropBatch(ctx, open[:n], "shutdown", stage, msg, true); err != nil {
			errs = append(errs, err)
		}
		open = open[n:]
	}
	return errors.Join(errs...)
}

// dropBatch is how many infra-errors records one publish carries.
const dropBatch = 256

// drop ends an open session with an infra-errors record of stage.
func (s *Server) drop(ctx context.Context, sess *session, outcome, stage, msg string) error {
	return s.dropBatch(ctx, []*session{sess}, outcome, stage, msg, false)
}

// dropBatch ends open sessions with infra-errors records of stage, in one
// publish. Sessions with calls in flight are refused unless force (a
// shutdown: their calls can no longer be answered into the session).
func (s *Server) dropBatch(ctx context.Context, sessions []*session, outcome, stage, msg string, force bool) error {
	var taken []*session
	var frames []schemas.Framed
	for _, sess := range sessions {
		sess.mu.Lock()
		if sess.phase != phaseOpen {
			sess.mu.Unlock()
			continue
		}
		if sess.inflight > 0 && !force {
			sess.mu.Unlock()
			return &APIError{Status: http.StatusConflict, Type: errConflict, Code: "calls_in_flight", Param: "session",
				Message: fmt.Sprintf("session %q has %d calls in flight", sess.meta.ID, sess.inflight)}
		}
		sess.phase = phaseFinishing
		partial := sess.traj
		partial.Calls = nil // token arrays stay out of the operator-facing topic
		partial.Messages = append([]schemas.Message(nil), sess.conversation()...)
		for i := range partial.Messages {
			partial.Messages[i].CallIndex = -1
		}
		partial.Status, partial.Error, partial.EndedAt = schemas.StatusInfraError, msg, time.Now().UTC()
		ie := schemas.InfraError{TaskID: sess.traj.TaskID, TrajectoryID: sess.traj.ID, RequestID: sess.traj.RequestID,
			Domain: sess.traj.Domain, Stage: stage, Error: fmt.Sprintf("%s (session %s, %d calls)", msg, sess.meta.ID, len(sess.calls)),
			Time: time.Now().UTC(), Partial: &partial}
		sess.mu.Unlock()
		f, err := schemas.FrameControl(&ie)
		if err != nil {
			sess.mu.Lock()
			sess.phase = phaseOpen
			sess.mu.Unlock()
			return fmt.Errorf("proxy: frame infra error: %w", err)
		}
		taken = append(taken, sess)
		frames = append(frames, f)
	}
	if len(taken) == 0 {
		return nil
	}
	err := s.d.InfraErrors.PublishFramed(ctx, frames...)
	if err != nil {
		s.m.PublishErrors.WithLabelValues("infra_errors").Inc()
		err = fmt.Errorf("proxy: publish infra errors: %w", err)
	}
	for _, sess := range taken {
		sess.mu.Lock()
		if err != nil {
			sess.phase = phaseOpen
			sess.mu.Unlock()
			continue
		}
		sess.phase, sess.outcome = phaseDone, outcome
		sess.mu.Unlock()
		s.end(sess.meta.ID, outcome, "")
		s.log.Info("session ended without a trajectory", "session", sess.meta.ID, "outcome", outcome, "calls", len(sess.calls))
	}
	return err
}

// longestToken is the length in bytes of tok's longest token, added
// tokens included.
func longestToken(tok *tokenizer.Tokenizer) int {
	n := 1
	for id := range tok.VocabSize() {
		if b, ok := tok.TokenBytes(int32(id)); ok {
			n = max(n, len(b))
		}
	}
	for _, a := range tok.AddedTokens() {
		n = max(n, len(a.Content))
	}
	return n
}

// version is the latest policy version known.
func (s *Server) version() int64 {
	if s.d.Version == nil {
		return 0
	}
	return s.d.Version()
}
