package proxy

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
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
	keys []msgKey          // match keys of the conversation's messages
	msgs []schemas.Message // the conversation as recorded
	hist *chattemplate.Incremental
	opts optsKey // tools and template options the history was rendered with
	open bool
	tip  *tip // the backing array of hist's ids
}

// tip is the length in use of a backing array of token ids that several
// states view. Only the state whose history is that long may grow in place
// (ForkShared); any other copies first (Fork). A linear conversation then
// keeps one growing array instead of one per state.
type tip struct{ n int }

// fork returns a copy of st's history to grow, sharing st's array when st
// holds its tip, with the tip the copy's growth will hold.
func (st *state) fork() (*chattemplate.Incremental, *tip) {
	if n := len(st.hist.Prompt()); st.tip != nil && st.tip.n == n {
		return st.hist.ForkShared(), st.tip
	}
	return st.hist.Fork(), &tip{}
}

// session is one client conversation being captured.
type session struct {
	mu        sync.Mutex
	meta      SessionMeta
	owner     string              // the API key that opened it ("" with auth disabled)
	traj      schemas.Trajectory  // without Calls: assembled at the finish
	calls     []schemas.CallInput // the recorded calls, prompts as views of the states' arrays
	states    []*state            // most recent first
	drift     int
	inflight  int
	lastUsed  time.Time
	phase     phase
	outcome   string // finished, aborted, expired (phaseDone)
	reward    *float64
	callRew   []float64
	versioned bool          // PolicyVersionStart set
	responses responseStore // the Responses API's stored responses (responses.go)
}

// msgKey identifies a message for continuing a history: a 128-bit hash of
// what the template renders of it. Reasoning and tool-call ids are left
// out — clients rarely send reasoning back and may renumber ids, and neither
// changes the tokens of our own replies, which the history holds as
// generated — and tool-call arguments are hashed as compact JSON, so a
// client that re-serializes them still matches. Hashes, not the text, so
// a session does not hold a second copy of its ~25 KB system prompt.
type msgKey [2]uint64

var keySeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func messageKey(m chattemplate.Message) msgKey {
	var k msgKey
	var c bytes.Buffer
	for i, seed := range keySeeds {
		var h maphash.Hash
		h.SetSeed(seed)
		h.WriteString(m.Role)
		h.WriteByte(0)
		h.WriteString(m.Content)
		for _, tc := range m.ToolCalls {
			h.WriteByte(1)
			h.WriteString(tc.Function.Name)
			h.WriteByte(0)
			c.Reset()
			if json.Compact(&c, tc.Function.Arguments) == nil {
				h.Write(c.Bytes())
			} else {
				h.Write(tc.Function.Arguments)
			}
		}
		k[i] = h.Sum64()
	}
	return k
}

func messageKeys(msgs []chattemplate.Message) []msgKey {
	out := make([]msgKey, len(msgs))
	for i, m := range msgs {
		out[i] = messageKey(m)
	}
	return out
}

// optsKey identifies the template options a history was rendered with:
// the thinking switch and the tools' bytes as sent (clients send the same
// bytes on every call; tools that differ only in whitespace render the same
// but start a new prefix, which costs tokens, never exactness). The tools
// key is the interned one, shared by every state.
type optsKey struct {
	thinking int8 // 0 unset, 1 false, 2 true
	tools    string
}

func optionsKey(thinking *bool, tl *toolList) optsKey {
	k := optsKey{tools: tl.key}
	if thinking != nil {
		k.thinking = 1
		if *thinking {
			k.thinking = 2
		}
	}
	return k
}

// match finds the state a request continues: an open state with exactly
// the request's messages (a retried call: same prompt), else the closed
// state whose messages are the longest proper prefix of the request's.
func (s *session) match(keys []msgKey, opts optsKey) (st *state, exact bool) {
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

func equalPrefix(prefix, keys []msgKey) bool {
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
