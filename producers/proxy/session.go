package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

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

// MaxIDBytes bounds the session, task and group names a client gives. A
// session id is held as a map key while the session is open and for
// finished_ttl after it ended, and is echoed in answers and logs: an
// unbounded one lets one request pin megabytes.
const MaxIDBytes = 256

// checkID checks a client-given name: 1 to MaxIDBytes bytes of valid UTF-8
// without control characters (a name is a key, a log field and a Parquet
// value; one that is not text could never be named again to finish it).
// The message never quotes the value: it may have come from the
// Authorization header, which carries the API key.
func checkID(field, v string) *APIError {
	switch {
	case len(v) > MaxIDBytes:
		return badRequest(field, "%s is %d bytes; at most %d bytes are allowed", field, len(v), MaxIDBytes)
	case !utf8.ValidString(v):
		return badRequest(field, "%s is not valid UTF-8: names are 1 to %d bytes of UTF-8 text without control characters", field, MaxIDBytes)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return badRequest(field, "%s contains a control character: names are 1 to %d bytes of UTF-8 text without control characters", field, MaxIDBytes)
	}
	return nil
}

// parseCredentials splits the Authorization header into the API key and the
// session fields. Its errors never quote the header: it carries the key
// (a malformed one, such as a key with '=' padding, must not come back in
// an answer or a proxy's log).
func parseCredentials(r *http.Request) (key string, meta SessionMeta, err *APIError) {
	token, aerr := bearerToken(r.Header.Get("Authorization"))
	if aerr != nil {
		return "", meta, aerr
	}
	fields := strings.Split(token, ";")
	set := func(name, value, where string) *APIError {
		switch name {
		case "session", "task", "group":
			if value == "" && name != "session" {
				return nil
			}
			if value != "" {
				if e := checkID(name, value); e != nil {
					e.Message += " (" + where + ")"
					return e
				}
			}
			switch name {
			case "session":
				meta.ID = value
			case "task":
				meta.Task = value
			default:
				meta.Group = value
			}
		case "domain":
			meta.Domain = value
		case "trial":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return badRequest("trial", "trial (%s) is not a non-negative integer", where)
			}
			meta.Trial = n
		default:
			return badRequest("", "%s has an unknown name: the fields after the key are session, task, group, trial and domain", where)
		}
		return nil
	}
	for i, f := range fields {
		where := fmt.Sprintf("bearer token field %d", i+1)
		name, value, ok := strings.Cut(f, "=")
		if !ok {
			if i == 0 {
				key = f
				continue
			}
			return "", meta, badRequest("", "%s is not name=value (the token is KEY;session=ID;task=…, fields separated by ';')", where)
		}
		if !slices.Contains([]string{"session", "task", "group", "trial", "domain"}, name) {
			if i == 0 {
				return "", meta, badRequest("", "%s contains '=' but is not one of session, task, group, trial, domain; API keys never contain '=' or ';'", where)
			}
			return "", meta, set(name, "", where)
		}
		where += " (" + name + ")"
		v, uerr := url.QueryUnescape(value)
		if uerr != nil {
			return "", meta, badRequest(name, "%s is not URL-escaped correctly (escape values with %%XX)", where)
		}
		if e := set(name, v, where); e != nil {
			return "", meta, e
		}
	}
	for _, h := range []struct{ header, name string }{{HeaderSession, "session"}, {HeaderTask, "task"}, {HeaderGroup, "group"},
		{HeaderTrial, "trial"}, {HeaderDomain, "domain"}} {
		if v := r.Header.Get(h.header); v != "" {
			if e := set(h.name, v, "header "+h.header); e != nil {
				return "", meta, e
			}
		}
	}
	return key, meta, nil
}

// bearerToken returns the token of an Authorization header. The scheme is
// matched without regard to case, as HTTP defines it (RFC 9110 §11.1:
// "bearer sk-…" is a Bearer token; some HTTP libraries write it so). A
// header without a scheme is taken as the token itself (KEY;session=…), as
// before. A header in another scheme (Basic, Token, Digest, …) is a 401
// that says to use Bearer: its credential is no bearer token, and reading
// it as one only produced errors about "bearer token fields" the client
// never wrote. The error never quotes the header, not even the scheme.
func bearerToken(auth string) (string, *APIError) {
	auth = strings.TrimSpace(auth)
	scheme, rest, ok := strings.Cut(auth, " ")
	if !ok || !isAuthScheme(scheme) {
		return auth, nil
	}
	if !strings.EqualFold(scheme, "Bearer") {
		return "", &APIError{Status: http.StatusUnauthorized, Type: errAuthentication, Code: "invalid_api_key",
			Message: "the Authorization header is not in the Bearer scheme: send Authorization: Bearer KEY;session=ID;task=… (the OpenAI SDKs do, from their api_key)"}
	}
	return strings.TrimSpace(rest), nil
}

// isAuthScheme reports whether s can be an HTTP authentication scheme
// name (an RFC 9110 token of letters, digits and '-'), as opposed to the
// start of a scheme-less token such as "KEY;session=my" (';' and '=' are
// never in a scheme name).
func isAuthScheme(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
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
	holders   int                 // handlers between acquire and letGo; guarded by Server.mu, not mu
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
// generated — and tool-call arguments are hashed as canonical JSON
// (canonicalJSON: parsed values, numbers by value, keys sorted), so a
// client that parses the arguments and sends them back re-serialized
// (1.0 → 1, "caf\u00e9" → "café", another key order) still matches. The
// state it matches holds the model's own bytes, so the training sequence
// keeps what the model wrote. Hashes, not the text, so
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
			if canonicalJSON(&c, tc.Function.Arguments) == nil {
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

// canonicalJSON writes raw's value in one form per value: objects with
// their keys sorted (a later duplicate key wins, as in Python's json and
// Go's), strings decoded and re-encoded (any escaping of the same text is
// the same string), numbers by value (canonicalNumber), no whitespace.
// Two JSON texts a client could produce from one parsed value write the
// same bytes.
func canonicalJSON(dst *bytes.Buffer, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	writeCanonical(dst, v)
	return nil
}

func writeCanonical(dst *bytes.Buffer, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				dst.WriteByte(',')
			}
			writeCanonical(dst, k)
			dst.WriteByte(':')
			writeCanonical(dst, v[k])
		}
		dst.WriteByte('}')
	case []any:
		dst.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				dst.WriteByte(',')
			}
			writeCanonical(dst, e)
		}
		dst.WriteByte(']')
	case string:
		b, _ := json.Marshal(v) // a string always marshals
		dst.Write(b)
	case json.Number:
		dst.WriteString(canonicalNumber(string(v)))
	case bool:
		dst.WriteString(strconv.FormatBool(v))
	case nil:
		dst.WriteString("null")
	}
}

// canonicalNumber writes a JSON number by its exact decimal value, as
// significant digits and a power of ten (0.D × 10^E, written 0.DeE, a JSON
// number of the same value): 1, 1.0, 1e0, 10E-1 and 0.1e1 are all "0.1e1";
// -0 and 0.0 are "0". Exact, unlike a float64 round trip (large integers that
// differ stay different), and linear in the number's length. An exponent
// too large for an int64 (no client writes one) keeps the number's text.
func canonicalNumber(s string) string {
	text := s
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 64)
		if err != nil || e > 1<<60 || e < -(1<<60) {
			return text
		}
		mant, exp = s[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0"
	}
	// value = 0.digits × 10^(exp + len(intPart) − leading zeros dropped)
	point := exp + int64(len(intPart)) - int64(len(intPart+frac)-len(digits))
	out := "0." + strings.TrimRight(digits, "0") + "e" + strconv.FormatInt(point, 10)
	if neg {
		out = "-" + out
	}
	return out
}
