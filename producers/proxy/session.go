package proxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/schemas"
)

// SessionMeta is what a client says about its session: the id, and the τ²
// task, group and trial its trajectory belongs to (the trainer groups
// trajectories by task for GRPO).
type SessionMeta struct {
	ID     string `json:"session"`
	Task   string `json:"task,omitempty"`
	Group  string `json:"group,omitempty"`
	Trial  int    `json:"trial,omitempty"`
	Domain string `json:"domain,omitempty"`
}

// Session fields are carried in the bearer token after the key,
// "KEY;session=ID;task=T;group=G;trial=N;domain=D" (values URL-escaped),
// so that a client whose only knob is its API key (most SDKs) names its
// session there; or in these headers, which take precedence.
const (
	HeaderSession = "X-Tau2-Session"
	HeaderTask    = "X-Tau2-Task"
	HeaderGroup   = "X-Tau2-Group"
	HeaderTrial   = "X-Tau2-Trial"
	HeaderDomain  = "X-Tau2-Domain"
)

// parseCredentials splits the Authorization header into the API key and the
// session fields.
func parseCredentials(r *http.Request) (key string, meta SessionMeta, err *APIError) {
	auth := r.Header.Get("Authorization")
	token, _ := strings.CutPrefix(auth, "Bearer ")
	fields := strings.Split(strings.TrimSpace(token), ";")
	set := func(name, value string) *APIError {
		switch name {
		case "session":
			meta.ID = value
		case "task":
			meta.Task = value
		case "group":
			meta.Group = value
		case "domain":
			meta.Domain = value
		case "trial":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return badRequest("", "trial %q is not a non-negative integer", value)
			}
			meta.Trial = n
		default:
			return badRequest("", "unknown session field %q in the bearer token (session, task, group, trial, domain)", name)
		}
		return nil
	}
	for i, f := range fields {
		name, value, ok := strings.Cut(f, "=")
		if !ok {
			if i == 0 {
				key = f
				continue
			}
			return "", meta, badRequest("", "bearer token field %d is not name=value", i)
		}
		v, uerr := url.QueryUnescape(value)
		if uerr != nil {
			return "", meta, badRequest("", "bearer token field %s: %v", name, uerr)
		}
		if e := set(name, v); e != nil {
			return "", meta, e
		}
	}
	for _, h := range []struct{ header, name string }{{HeaderSession, "session"}, {HeaderTask, "task"}, {HeaderGroup, "group"},
		{HeaderTrial, "trial"}, {HeaderDomain, "domain"}} {
		if v := r.Header.Get(h.header); v != "" {
			if e := set(h.name, v); e != nil {
				return "", meta, e
			}
		}
	}
	return key, meta, nil
}

// phase of a session's life.
type phase int

const (
	phaseOpen      phase = iota
	phaseFinishing       // a finish is publishing
	phaseDone            // published, aborted or expired
)

// state is a conversation state the session can continue from token
// exactly: a call's prompt (open: the history ends with the generation
// prompt) or a returned choice (closed: the completion as generated, then
// <|im_end|>).
type state struct {
	keys []string          // match keys of the conversation's messages
	msgs []schemas.Message // the conversation as recorded
	hist *chattemplate.Incremental
	opts string // tools and template options the history was rendered with
	open bool
}

// session is one client conversation being captured.
type session struct {
	mu        sync.Mutex
	meta      SessionMeta
	traj      schemas.Trajectory
	states    []*state // most recent first
	drift     int
	inflight  int
	lastUsed  time.Time
	phase     phase
	outcome   string // finished, aborted, expired (phaseDone)
	reward    *float64
	callRew   []float64
	versioned bool // PolicyVersionStart set
}

// messageKey is what identifies a message for continuing a history: what
// the template renders of it. Reasoning and tool-call ids are left out —
// clients rarely send reasoning back and may renumber ids, and neither
// changes the tokens of our own replies, which the history holds as
// generated — and tool-call arguments compare as compact JSON, so a client
// that re-serializes them still matches.
func messageKey(m chattemplate.Message) string {
	var b strings.Builder
	b.WriteString(m.Role)
	b.WriteByte(0)
	b.WriteString(m.Content)
	for _, tc := range m.ToolCalls {
		b.WriteByte(1)
		b.WriteString(tc.Function.Name)
		b.WriteByte(0)
		var c bytes.Buffer
		if json.Compact(&c, tc.Function.Arguments) == nil {
			b.Write(c.Bytes())
		} else {
			b.Write(tc.Function.Arguments)
		}
	}
	return b.String()
}

func messageKeys(msgs []chattemplate.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = messageKey(m)
	}
	return out
}

// optionsKey identifies the template options a history was rendered with.
func optionsKey(opts chattemplate.Options) string {
	var b strings.Builder
	if opts.EnableThinking != nil {
		b.WriteString(strconv.FormatBool(*opts.EnableThinking))
	}
	for _, t := range opts.Tools {
		b.WriteByte(0)
		var c bytes.Buffer
		if json.Compact(&c, t) == nil {
			b.Write(c.Bytes())
		} else {
			b.Write(t)
		}
	}
	return b.String()
}

// match finds the state a request continues: an open state with exactly
// the request's messages (a retried call: same prompt), else the closed
// state whose messages are the longest proper prefix of the request's.
func (s *session) match(keys []string, opts string) (st *state, exact bool) {
	for _, c := range s.states {
		if c.opts != opts || len(c.keys) > len(keys) {
			continue
		}
		if !equalPrefix(c.keys, keys) {
			continue
		}
		if c.open {
			if len(c.keys) == len(keys) {
				return c, true
			}
			continue
		}
		if len(c.keys) < len(keys) && (st == nil || len(c.keys) > len(st.keys)) {
			st = c
		}
	}
	return st, false
}

func equalPrefix(prefix, keys []string) bool {
	for i := range prefix {
		if prefix[i] != keys[i] {
			return false
		}
	}
	return true
}

// push adds states, most recent first, keeping at most n.
func (s *session) push(n int, sts ...*state) {
	out := make([]*state, 0, min(n, len(sts)+len(s.states)))
	for i := len(sts) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, sts[i])
	}
	for _, st := range s.states {
		if len(out) >= n {
			break
		}
		out = append(out, st)
	}
	s.states = out
}

// conversation is the trajectory's conversation: that of the most recent
// closed state (the last call's first choice), else of the last prompt.
func (s *session) conversation() []schemas.Message {
	for _, st := range s.states {
		if !st.open {
			return st.msgs
		}
	}
	if len(s.states) > 0 {
		return s.states[0].msgs
	}
	return nil
}

// recordMessage converts a request message for the trajectory.
func recordMessage(m chattemplate.Message, turn int, now time.Time) schemas.Message {
	out := schemas.Message{Role: schemas.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID, Turn: turn,
		Timestamp: now, CallIndex: -1}
	if m.ReasoningContent != nil {
		out.Reasoning = *m.ReasoningContent
	}
	if m.Role == chattemplate.RoleTool {
		out.Requestor = schemas.RequestorAssistant
	}
	for _, tc := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, schemas.ToolCall{ID: tc.ID, Name: tc.Function.Name,
			Arguments: string(tc.Function.Arguments), Requestor: schemas.RequestorAssistant})
	}
	return out
}
