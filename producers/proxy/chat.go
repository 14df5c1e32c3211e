package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"
	"golang.org/x/text/unicode/norm"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/protocol"
	"tau2rl/schemas"
)

// call is one validated chat request.
type call struct {
	req      ChatRequest
	msgs     []chattemplate.Message
	keys     []msgKey
	opts     chattemplate.Options
	optsKey  optsKey
	n        int
	stops    []string
	maxToks  int // client's budget, 0 when unset
	thinking *bool
}

// choice is one generated and parsed completion.
type choice struct {
	gen       llm.Generation
	ids       []int32 // generation ids, cut at a stop string
	recFinish string  // the recorded finish reason: the server's, or stop after a stop string
	finish    string  // OpenAI finish_reason: stop, length, tool_calls
	message   chattemplate.Message
	reasoning *string
	invalid   string
	callIndex int
}

// readChat decodes and validates a chat request.
func readChat(r *http.Request, cfg Config, ic *internCache) (*call, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= cfg.Limits.MaxRequestBytes {
		buf.Grow(int(r.ContentLength) + 1)
	}
	_, err := buf.ReadFrom(r.Body)
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &APIError{Status: http.StatusRequestEntityTooLarge, Type: errInvalidRequest, Code: "request_too_large",
				Message: fmt.Sprintf("request body exceeds %d bytes (limits.max_request_bytes)", mbe.Limit)}
		}
		return nil, badRequest("", "read body: %v", err)
	}
	c := &call{}
	// goccy/go-json decodes the request (a τ² conversation carries a ~25 KB
	// system prompt and ~10 KB of tools on every call) about three times
	// faster than encoding/json, into the same types.
	if err := gojson.Unmarshal(body, &c.req); err != nil {
		// The slow path, only for bodies that did not decode: encoding/json
		// says where and what (and decides, should the two disagree).
		c.req = ChatRequest{}
		if ae := decodeJSON(body, &c.req, "a chat-completions request"); ae != nil {
			return nil, ae
		}
	}
	return checkCall(c, cfg, ic)
}

// checkCall validates a decoded chat request and derives the call from it.
// The Responses API (responses.go) converts its requests into chat requests
// and validates them here too, so both routes render and check alike.
func checkCall(c *call, cfg Config, ic *internCache) (*call, error) {
	req := &c.req
	var err error
	if c.msgs, err = templateMessages(req.Messages, ic); err != nil {
		return nil, err
	}
	c.keys = messageKeys(c.msgs)
	tl, err := ic.checkTools(req.Tools)
	if err != nil {
		return nil, err
	}
	if err := checkToolChoice(req.ToolChoice); err != nil {
		return nil, err
	}
	if err := checkToolUse(req, tl.tools); err != nil {
		return nil, err
	}
	if err := checkToolMessages(req.Messages); err != nil {
		return nil, err
	}
	if c.stops, err = stopStrings(req.Stop); err != nil {
		return nil, err
	}
	c.n = 1
	if req.N != nil {
		if *req.N < 1 || *req.N > cfg.Limits.MaxN {
			return nil, badRequest("n", "n must be between 1 and %d (limits.max_n), got %d", cfg.Limits.MaxN, *req.N)
		}
		c.n = *req.N
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
		return nil, badRequest("temperature", "temperature must be in [0, 2], got %g", *t)
	}
	if p := req.TopP; p != nil && (*p <= 0 || *p > 1) {
		return nil, badRequest("top_p", "top_p must be in (0, 1], got %g", *p)
	}
	for _, mt := range []struct {
		name string
		v    *int
	}{{"max_tokens", req.MaxTokens}, {"max_completion_tokens", req.MaxCompletionTokens}} {
		if mt.v != nil {
			if *mt.v < 1 {
				return nil, badRequest(mt.name, "%s must be ≥ 1, got %d", mt.name, *mt.v)
			}
			if c.maxToks == 0 || *mt.v < c.maxToks {
				c.maxToks = *mt.v
			}
		}
	}
	c.thinking = cfg.EnableThinking
	if v, ok := req.ChatTemplateKwargs["enable_thinking"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			return nil, badRequest("chat_template_kwargs.enable_thinking", "enable_thinking must be a boolean")
		}
		c.thinking = &b
	}
	c.opts = chattemplate.Options{Tools: tl.tools, EnableThinking: c.thinking}
	c.optsKey = optionsKey(c.thinking, tl)
	return c, nil
}

// checkToolMessages refuses a tool message that answers no call, as OpenAI does ("messages with
// role 'tool' must be a response to a preceding message with 'tool_calls'"): it must follow an
// assistant message with tool_calls (other tool messages between them), and where both carry
// ids, its tool_call_id must be one of those calls'. Accepted, such a message would render a tool
// response the model never asked for, and the training prompt would hold a turn no serving
// engine's client sends.
func checkToolMessages(msgs []ChatMessage) error {
	var calls []string // the ids of the last assistant message's tool calls
	open := false      // the messages since the last assistant message with tool_calls are all tool messages
	for i, m := range msgs {
		switch m.Role {
		case "assistant":
			calls, open = calls[:0], len(m.ToolCalls) > 0
			for _, tc := range m.ToolCalls {
				calls = append(calls, tc.ID)
			}
		case "tool":
			param := fmt.Sprintf("messages[%d]", i)
			if !open {
				return badRequest(param, "%s: a message with role 'tool' must answer a preceding assistant message's tool_calls, and none precedes it", param)
			}
			if m.ToolCallID != "" && !slices.Contains(calls, "") && !slices.Contains(calls, m.ToolCallID) {
				return badRequest(param+".tool_call_id", "%s.tool_call_id %q answers none of the preceding assistant message's tool_calls", param, m.ToolCallID)
			}
		default:
			open = false
		}
	}
	return nil
}

// chat serves POST /v1/chat/completions.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	key, meta, perr := parseCredentials(r)
	if perr != nil {
		return perr
	}
	c, err := readChat(r, s.cfg, &s.intern)
	if err != nil {
		return err
	}
	if err := s.checkTextLength(c.msgs); err != nil {
		return err
	}
	if s.cfg.Auth.Disabled {
		key = ""
	}
	sess, err := s.acquire(meta, key)
	if err != nil {
		return err
	}
	defer s.letGo(sess) // after release (defers run last first)
	prompt, err := s.prepare(sess, c)
	if err != nil {
		return err
	}
	release := releaseOnce(sess)
	defer release()
	ids := prompt.hist.Prompt()
	budget, err := s.newTokenBudget(c, len(ids), "messages")
	if err != nil {
		return err
	}
	genStart := time.Now()
	gens, err := s.generate(r.Context(), sess, c, ids, budget)
	genTime := time.Since(genStart)
	if err != nil {
		return policyError(err)
	}
	choices, err := s.record(sess, c, prompt, gens)
	if err != nil {
		return err
	}
	release()
	id := "chatcmpl-" + randomHex(12)
	usage := protocol.Usage{PromptTokens: len(ids)}
	for _, ch := range choices {
		usage.CompletionTokens += len(ch.ids)
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	created := time.Now().Unix()
	model := c.req.Model
	if model == "" {
		model = s.cfg.Model
	}
	// The proxy's own time, recorded before the answer is written (writing
	// a stream is the client's pace, not the proxy's work).
	s.m.Generation.Observe(genTime.Seconds())
	s.m.Overhead.Observe((time.Since(start) - genTime).Seconds())
	if c.req.Stream {
		includeUsage := c.req.StreamOptions != nil && c.req.StreamOptions.IncludeUsage
		return writeStream(w, id, model, created, choices, usage, includeUsage)
	}
	writeJSON(w, http.StatusOK, completionBody(id, model, created, choices, usage))
	return nil
}

// checkTextLength refuses, before anything is tokenized, a conversation
// whose text alone cannot fit engine_max_tokens. Tokenizing costs about 45
// bytes of heap per byte of text (runes, offsets, the split regex's
// matches): a 7.5 MB request allocated ~830 MB (~340 MB of live heap) to
// learn it held two million tokens. No token is longer than maxTokenBytes, so the verbatim
// text of system, user and tool turns (NFC-normalized, as the tokenizer
// sees it) takes at least len/maxTokenBytes tokens: a sound lower bound,
// never refusing a conversation that fits. (Assistant turns, tool-call
// arguments and tools are left out: the template or a matched state may
// render them shorter than sent.)
func (s *Server) checkTextLength(msgs []chattemplate.Message) error {
	n := 0
	for _, m := range msgs {
		switch m.Role {
		case chattemplate.RoleSystem, chattemplate.RoleUser, chattemplate.RoleTool:
			if utf8.ValidString(m.Content) && norm.NFC.IsNormalString(m.Content) {
				n += len(m.Content)
			} else {
				n += len(s.tok.Normalize(m.Content))
			}
		}
	}
	if least := n / s.maxTokenBytes; least >= s.cfg.EngineMaxTokens {
		return &APIError{Status: http.StatusBadRequest, Type: errInvalidRequest, Code: "context_length_exceeded", Param: "messages",
			Message: fmt.Sprintf("This model's maximum context length is %d tokens (engine_max_tokens). However, your messages resulted in at least %d tokens (%d bytes of text).", s.cfg.EngineMaxTokens, least, n)}
	}
	return nil
}

// prepare finds or renders the call's prompt under the session's lock and
// takes an in-flight slot.
func (s *Server) prepare(sess *session, c *call) (*state, error) {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	switch {
	case sess.phase == phaseFinishing:
		return nil, &APIError{Status: http.StatusConflict, Type: errConflict, Code: "session_finishing", Param: "session",
			Message: fmt.Sprintf("session %q is being finished", sess.meta.ID)}
	case sess.phase == phaseDone:
		return nil, endedError(sess.meta.ID, endedSession{outcome: sess.outcome})
	case sess.inflight >= s.cfg.Limits.MaxSessionConcurrency:
		return nil, &APIError{Status: http.StatusTooManyRequests, Type: errRateLimit, Code: "session_concurrency",
			Message: fmt.Sprintf("session %q has %d calls in flight (limits.max_session_concurrency)", sess.meta.ID, sess.inflight)}
	case len(sess.calls)+c.n > s.cfg.Limits.MaxCallsPerSession:
		return nil, &APIError{Status: http.StatusTooManyRequests, Type: errRateLimit, Code: "session_call_limit",
			Message: fmt.Sprintf("session %q has recorded %d calls (limits.max_calls_per_session %d); finish it", sess.meta.ID, len(sess.calls), s.cfg.Limits.MaxCallsPerSession)}
	}
	now := time.Now().UTC()
	base, exact := sess.match(c.keys, c.optsKey)
	var st *state
	switch {
	case exact:
		st = base
	case base != nil:
		delta := c.msgs[len(base.keys):]
		h, t := base.fork()
		if err := h.AddMessages(delta...); err != nil {
			return nil, badRequest("messages", "render: %v", err)
		}
		t.n = len(h.Prompt())
		st = &state{keys: c.keys, hist: h, opts: c.optsKey, open: true, msgs: slices.Clip(base.msgs), tip: t}
		for i, m := range delta {
			st.msgs = append(st.msgs, recordMessage(m, len(base.msgs)+i, now))
		}
	default:
		h, err := s.newHistory(c.msgs, c.opts)
		if err != nil {
			return nil, badRequest("messages", "render: %v", err)
		}
		if len(sess.states) > 0 {
			// The client edited or dropped turns we recorded (or changed
			// the tools): the conversation restarts from a new prefix; the
			// trajectory keeps both, never tokens the model did not see.
			sess.drift++
			sess.traj.Tags["template_drift"] = fmt.Sprint(sess.drift)
			s.m.TemplateDrift.Inc()
		}
		st = &state{keys: c.keys, hist: h, opts: c.optsKey, open: true, msgs: make([]schemas.Message, len(c.msgs)), tip: &tip{n: len(h.Prompt())}}
		for i, m := range c.msgs {
			st.msgs[i] = recordMessage(m, i, now)
		}
	}
	sess.inflight++
	sess.lastUsed = now
	return st, nil
}

// newHistory renders a conversation from scratch. The system turn (with the
// tools) is tokenized once per distinct system prompt and shared by every
// session that starts with it, when the rest is renderable after it (no
// assistant turn, whose thinking the template treats by position).
func (s *Server) newHistory(msgs []chattemplate.Message, opts chattemplate.Options) (*chattemplate.Incremental, error) {
	if msgs[0].Role == chattemplate.RoleSystem && !slices.ContainsFunc(msgs[1:], func(m chattemplate.Message) bool { return m.Role == chattemplate.RoleAssistant }) {
		p, err := s.prefixes.Get(s.tok, msgs[:1], opts)
		if err != nil {
			return nil, err
		}
		return chattemplate.NewIncremental(p, msgs[1:])
	}
	h, err := chattemplate.New(chattemplate.ModeIncremental, s.tok, msgs, opts)
	if err != nil {
		return nil, err
	}
	return h.(*chattemplate.Incremental), nil
}

// generate runs the n generations concurrently, each holding a slot of
// limits.max_concurrent_calls.
// releaseOnce returns the function that ends one call's hold on its session (its in-flight count
// and idle clock), however often it is called: a handler releases as soon as the call is recorded,
// so the session takes its next call while this response is still being written, and defers it
// for the error paths.
func releaseOnce(sess *session) func() {
	released := false
	return func() {
		if !released {
			released = true
			sess.mu.Lock()
			sess.inflight--
			sess.lastUsed = time.Now().UTC()
			sess.mu.Unlock()
		}
	}
}

// newTokenBudget is how many tokens a call may generate: the proxy's max_new_tokens, the room its
// prompt of promptLen tokens leaves in engine_max_tokens, and the call's own limit. A prompt that
// leaves no room is refused, naming param, the request field that holds the conversation
// ("messages" for chat completions, "input" for the Responses API).
func (s *Server) newTokenBudget(c *call, promptLen int, param string) (int, error) {
	room := s.cfg.EngineMaxTokens - promptLen
	if room <= 0 {
		return 0, &APIError{Status: http.StatusBadRequest, Type: errInvalidRequest, Code: "context_length_exceeded", Param: param,
			Message: fmt.Sprintf("This model's maximum context length is %d tokens (engine_max_tokens). However, your %s resulted in %d tokens.", s.cfg.EngineMaxTokens, param, promptLen)}
	}
	budget := min(s.cfg.MaxNewTokens, room)
	if c.maxToks > 0 {
		budget = min(budget, c.maxToks)
	}
	return budget, nil
}

func (s *Server) generate(ctx context.Context, sess *session, c *call, prompt []int32, budget int) ([]llm.Generation, error) {
	out := make([]llm.Generation, c.n)
	errs := make([]error, c.n)
	var wg sync.WaitGroup
	rid := sess.meta.ID + "-" + randomHex(6)
	for i := range c.n {
		req := llm.GenerateRequest{InputIDs: prompt, MaxNewTokens: budget, Temperature: 1, TopP: 1, StopTokenIDs: s.stops,
			RequestID: fmt.Sprintf("%s-%d", rid, i)}
		if c.req.Temperature != nil {
			req.Temperature = *c.req.Temperature
		}
		if c.req.TopP != nil {
			req.TopP = *c.req.TopP
		}
		if c.req.TopK != nil {
			req.TopK = *c.req.TopK
		}
		if c.req.Seed != nil {
			seed := *c.req.Seed + int64(i)
			req.Seed = &seed
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.sem.Acquire(ctx, 1); err != nil {
				errs[i] = err
				return
			}
			defer s.sem.Release(1)
			out[i], errs[i] = llm.GenerateResumable(ctx, s.d.Policy, req, llm.ResumeOptions{Version: s.version})
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// policyError maps a policy failure to the client's answer. Nothing of the
// call is recorded.
func policyError(err error) *APIError {
	switch {
	case errors.Is(err, llm.ErrRejected):
		return &APIError{Status: http.StatusBadRequest, Type: errInvalidRequest, Code: "policy_rejected", Message: "the policy server rejected the request: " + err.Error()}
	case errors.Is(err, llm.ErrBadResponse):
		return &APIError{Status: http.StatusBadGateway, Type: errServer, Code: "policy_bad_response", Message: "the policy server answered badly: " + err.Error()}
	case errors.Is(err, context.Canceled):
		return &APIError{Status: 499, Type: errServer, Code: "client_closed", Message: "the request was cancelled"}
	default:
		return &APIError{Status: http.StatusServiceUnavailable, Type: errServer, Code: "policy_unavailable", Message: "the policy server is unavailable: " + err.Error()}
	}
}

// record parses the generations, appends them to the session's trajectory
// and makes their states.
func (s *Server) record(sess *session, c *call, prompt *state, gens []llm.Generation) ([]*choice, error) {
	choices := make([]*choice, len(gens))
	for i, g := range gens {
		ch, err := s.parse(g, c.stops)
		if err != nil {
			return nil, &APIError{Status: http.StatusBadGateway, Type: errServer, Code: "policy_bad_response", Message: err.Error()}
		}
		choices[i] = ch
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.phase != phaseOpen { // cannot happen: finish and expiry wait for calls in flight
		return nil, endedError(sess.meta.ID, endedSession{outcome: sess.outcome})
	}
	if !sess.versioned {
		sess.traj.PolicyVersionStart = s.version()
		if v := gens[0].Versions; len(v) > 0 {
			sess.traj.PolicyVersionStart = v[0]
		}
		sess.versioned = true
	}
	promptIDs := prompt.hist.Prompt()
	states := []*state{prompt}
	now := time.Now().UTC()
	for i, ch := range choices {
		h, t := prompt.fork()
		if _, err := h.AddCompletion(ch.ids); err != nil {
			return nil, fmt.Errorf("proxy: record completion: %w", err)
		}
		t.n = len(h.Prompt())
		if len(gens[i].Logprobs) < len(ch.ids) || len(gens[i].Versions) < len(ch.ids) {
			return nil, &APIError{Status: http.StatusBadGateway, Type: errServer, Code: "policy_bad_response", Message: "the policy server returned fewer log-probs than tokens"}
		}
		// The prompt is a view of the state's token array, not a copy: the
		// trajectory is assembled (prefix-shared) when the session finishes.
		idx := len(sess.calls)
		sess.calls = append(sess.calls, schemas.CallInput{Prompt: promptIDs, Completion: ch.ids,
			BehaviorLogprobs: gens[i].Logprobs[:len(ch.ids)], VersionRuns: schemas.RunsFromVersions(gens[i].Versions[:len(ch.ids)]),
			FinishReason: ch.recFinish, InvalidFormat: ch.invalid != "", LatencyMS: float64(gens[i].Latency.Microseconds()) / 1000})
		ch.callIndex = idx
		if ch.invalid != "" {
			sess.traj.InvalidFormatTurns++
			s.m.InvalidFormat.Inc()
		}
		msg := ch.message
		for k := range msg.ToolCalls {
			msg.ToolCalls[k].ID = "call_" + randomHex(12)
		}
		ch.message = msg
		rec := recordMessage(msg, len(prompt.msgs), now)
		if ch.reasoning != nil {
			rec.Reasoning = *ch.reasoning
		}
		rec.CallIndex = idx
		st := &state{keys: append(slices.Clip(c.keys), messageKey(msg)), hist: h, opts: c.optsKey,
			msgs: append(slices.Clip(prompt.msgs), rec), tip: t}
		states = append(states, st)
		s.m.Tokens.WithLabelValues("completion").Add(float64(len(ch.ids)))
	}
	s.m.Tokens.WithLabelValues("prompt").Add(float64(len(promptIDs)))
	// The first choice is pushed last, so it is the most recent state: the
	// conversation a finish records.
	slices.Reverse(states[1:])
	sess.push(s.cfg.HistoryStates, states...)
	return choices, nil
}

// parse splits a generation into OpenAI's message parts: the Qwen3 reasoning
// parser first (a <tool_call> inside <think> is thinking, not a call), then
// tool calls, then content; the stop token is never part of the text. Stop
// strings cut the completion after the token that completes the first one;
// the text returned ends before it.
func (s *Server) parse(g llm.Generation, stops []string) (*choice, error) {
	ch := &choice{gen: g, ids: g.IDs, finish: "stop", recFinish: g.Finish}
	if g.Finish == llm.FinishLength {
		ch.finish = "length"
	}
	body := g.IDs
	if n := len(body); n > 0 && slices.Contains(s.stops, body[n-1]) {
		body = body[:n-1]
	}
	text, err := s.tok.Decode(body)
	if err != nil {
		return nil, fmt.Errorf("proxy: decode completion: %w", err)
	}
	if len(stops) > 0 {
		if k, at, ok := s.cutAtStop(body, text, stops); ok {
			ch.ids, text, ch.finish, ch.recFinish = g.IDs[:k], text[:at], "stop", llm.FinishStop
		}
	}
	comp := chattemplate.ParseCompletion(text)
	if comp.HasThinking {
		ch.reasoning = chattemplate.Ptr(comp.Reasoning)
	}
	ch.invalid = comp.Invalid
	if comp.Valid() {
		ch.message = chattemplate.Message{Role: chattemplate.RoleAssistant, Content: comp.Content, ToolCalls: comp.ToolCalls}
		if len(comp.ToolCalls) > 0 && ch.finish == "stop" {
			ch.finish = "tool_calls"
		}
		return ch, nil
	}
	// Unparseable markup (often a completion cut by max_tokens) is returned
	// as text, as AReaL's proxy does, and recorded with invalid_format.
	visible := chattemplate.VisibleText(text)
	if !strings.Contains(text, chattemplate.ThinkClose) && strings.Contains(text, chattemplate.ThinkOpen) {
		visible = "" // the reasoning was cut off: nothing visible was written yet
	}
	ch.message = chattemplate.Message{Role: chattemplate.RoleAssistant, Content: visible}
	return ch, nil
}

// cutAtStop finds the earliest stop string in text (the decoded ids): at
// is its byte offset, k the fewest ids whose bytes reach its end.
func (s *Server) cutAtStop(ids []int32, text string, stops []string) (k, at int, ok bool) {
	at = -1
	end := 0
	for _, st := range stops {
		if i := strings.Index(text, st); i >= 0 && (at < 0 || i < at) {
			at, end = i, i+len(st)
		}
	}
	if at < 0 {
		return 0, 0, false
	}
	n := 0
	for j, id := range ids {
		b, _ := s.tok.TokenBytes(id)
		if n += len(b); n >= end {
			return j + 1, at, true
		}
	}
	return len(ids), at, true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
