package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"reflect"
	"strings"
	"sync"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/protocol"
)

// ChatRequest is OpenAI's chat-completions request as the proxy reads it (protocol's OpenAI
// form: tool-call arguments a JSON string). Fields the proxy does not use (user, metadata,
// store, frequency_penalty, …) are accepted and ignored, as vLLM and SGLang do, so unmodified
// clients work.
type ChatRequest = protocol.ChatRequest

// StreamOptions is OpenAI's stream_options.
type StreamOptions = protocol.StreamOptions

// ChatMessage is one OpenAI message. Content is a string, null, or an array
// of content parts (only text parts are accepted).
type ChatMessage = protocol.ChatMessage

// WireToolCall is a tool call as OpenAI sends it: arguments are a JSON string
// holding the JSON object.
type WireToolCall = protocol.ToolCall

// APIError is an error answered in OpenAI's shape: {"error": {"message",
// "type", "param", "code"}} with the HTTP status clients branch on.
type APIError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
	// Final marks an error that no retry can cure (the session ended, it
	// belongs to another key): the answer carries "x-should-retry: false",
	// which the OpenAI SDKs (Python, Node) obey before their status rules
	// (they retry 408, 409, 429 and ≥ 500).
	Final bool
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// OpenAI's error types.
const (
	errInvalidRequest = "invalid_request_error"
	errAuthentication = "authentication_error"
	errNotFound       = "not_found_error"
	errConflict       = "conflict_error"
	errRateLimit      = "rate_limit_error"
	errServer         = "server_error"
)

func badRequest(param, format string, a ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: errInvalidRequest, Param: param, Message: fmt.Sprintf(format, a...)}
}

func writeAPIError(w http.ResponseWriter, e *APIError) {
	if e.Final {
		w.Header().Set("x-should-retry", "false")
	}
	writeJSON(w, e.Status, protocol.APIError(e.Type, e.Message, e.Param, e.Code))
}

func writeJSON(w http.ResponseWriter, status int, v any) { protocol.WriteJSON(w, status, v) }

// asAPIError turns any error into an APIError (500 when it is not one).
func asAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	return &APIError{Status: http.StatusInternalServerError, Type: errServer, Message: err.Error()}
}

// templateMessages converts the request's messages into the chat template's
// form. "developer" is OpenAI's newer name for system.
func templateMessages(msgs []ChatMessage, ic *internCache) ([]chattemplate.Message, error) {
	if len(msgs) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	out := make([]chattemplate.Message, len(msgs))
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		text, err := chattemplate.JoinContentText(m.Content, ic.textJoin)
		if err != nil {
			return nil, badRequest(param+".content", "%v", err)
		}
		if fc := bytes.TrimSpace(m.FunctionCall); len(fc) > 0 && string(fc) != "null" {
			return nil, badRequest(param+".function_call", "function_call is OpenAI's deprecated form of tool_calls and is not supported: send tool_calls [{\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}]")
		}
		cm := chattemplate.Message{Role: m.Role, Content: text, ToolCallID: m.ToolCallID}
		switch m.Role {
		case "developer", chattemplate.RoleSystem:
			cm.Role = chattemplate.RoleSystem
			cm.Content = ic.intern(text)
		case chattemplate.RoleUser:
		case chattemplate.RoleTool:
			if m.ToolCallID == "" {
				return nil, badRequest(param+".tool_call_id", "a tool message needs tool_call_id")
			}
		case chattemplate.RoleAssistant:
			cm.ReasoningContent = m.ReasoningContent
			for k, tc := range m.ToolCalls {
				args := strings.TrimSpace(tc.Function.Arguments)
				if args == "" {
					args = "{}"
				}
				if tc.Function.Name == "" {
					return nil, badRequest(fmt.Sprintf("%s.tool_calls[%d].function.name", param, k), "empty function name")
				}
				if !json.Valid([]byte(args)) {
					return nil, badRequest(fmt.Sprintf("%s.tool_calls[%d].function.arguments", param, k), "arguments are not JSON")
				}
				cm.ToolCalls = append(cm.ToolCalls, chattemplate.ToolCall{ID: tc.ID, Type: "function",
					Function: chattemplate.FunctionCall{Name: tc.Function.Name, Arguments: json.RawMessage(args)}})
			}
		default:
			return nil, badRequest(param+".role", "role %q is not system, developer, user, assistant or tool", m.Role)
		}
		out[i] = cm
	}
	return out, nil
}

// internCache keeps one copy of the large values every call of every
// session repeats — the tool list (~10 KB for τ²'s airline domain) and the
// system prompt (~25 KB) — so that open sessions share them instead of each
// holding the copy its requests decoded, and tool lists are checked once.
type internCache struct {
	// textJoin joins the text parts of a message's content (the serving
	// engine's separator: Config.TextPartsJoin).
	textJoin string

	seed  maphash.Seed
	once  sync.Once
	mu    sync.Mutex
	tools map[uint64]*toolList
	strs  map[uint64]string
}

// toolList is a checked tool list and its key (the tools' bytes joined).
type toolList struct {
	tools []json.RawMessage
	key   string
}

// maxIntern bounds each map; beyond it values are checked and kept per call.
const maxIntern = 1024

func (c *internCache) init() {
	c.once.Do(func() { c.seed, c.tools, c.strs = maphash.MakeSeed(), map[uint64]*toolList{}, map[uint64]string{} })
}

// checkTools checks tools (once per distinct list) and returns the shared
// copy of the list and its key.
func (c *internCache) checkTools(tools []json.RawMessage) (*toolList, error) {
	if len(tools) == 0 {
		return &toolList{}, nil
	}
	c.init()
	n := 0
	for _, t := range tools {
		n += len(t) + 1
	}
	joined := make([]byte, 0, n)
	for _, t := range tools {
		joined = append(append(joined, t...), 0)
	}
	sum := maphash.Bytes(c.seed, joined)
	c.mu.Lock()
	prev, found := c.tools[sum]
	c.mu.Unlock()
	if found && prev.key == string(joined) {
		return prev, nil
	}
	if err := checkTools(tools); err != nil {
		return nil, err
	}
	tl := &toolList{tools: tools, key: string(joined)}
	c.mu.Lock()
	if len(c.tools) < maxIntern {
		c.tools[sum] = tl
	}
	c.mu.Unlock()
	return tl, nil
}

// intern returns the shared copy of a long string (short ones as they are).
func (c *internCache) intern(s string) string {
	if len(s) < 1024 {
		return s
	}
	c.init()
	sum := maphash.String(c.seed, s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.strs[sum]; ok && prev == s {
		return prev
	}
	if len(c.strs) < maxIntern {
		c.strs[sum] = s
	}
	return s
}

// checkTools checks the tools are OpenAI function tools; the template
// renders them verbatim (tojson) in the system turn.
func checkTools(tools []json.RawMessage) error {
	for i, t := range tools {
		var v struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(t, &v); err != nil {
			return badRequest(fmt.Sprintf("tools[%d]", i), "tool is not a JSON object: %v", err)
		}
		if v.Type != "function" || v.Function == nil || v.Function.Name == "" {
			return badRequest(fmt.Sprintf("tools[%d]", i), "only function tools with a name are supported")
		}
	}
	return nil
}

// checkToolChoice accepts OpenAI's tool_choice values. The proxy does not
// constrain sampling (the policy is the model being trained: what it
// generates is what is recorded), so the value is checked, not enforced.
func checkToolChoice(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return nil
		}
		return badRequest("tool_choice", "tool_choice %q is not auto, none or required", s)
	}
	var v struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Type != "function" || v.Function.Name == "" {
		return badRequest("tool_choice", "tool_choice must be auto, none, required or {\"type\":\"function\",\"function\":{\"name\":…}}")
	}
	return nil
}

// checkToolUse refuses what OpenAI (and vLLM) refuse about tools, where
// accepting would silently give the model something other than what the
// client asked for: a tool_choice other than "none" with no tools (there is
// nothing to call), a named tool_choice that names no tool in tools, and
// the deprecated functions / function_call (the model would never see the
// functions). tool_choice must already have passed checkToolChoice.
func checkToolUse(req *ChatRequest, tools []json.RawMessage) error {
	for _, f := range []struct {
		name, use string
		raw       json.RawMessage
	}{{"functions", "tools: [{\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}]", req.Functions},
		{"function_call", "tool_choice (\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}})", req.FunctionCall}} {
		if raw := bytes.TrimSpace(f.raw); len(raw) > 0 && string(raw) != "null" {
			return badRequest(f.name, "%s is OpenAI's deprecated form and is not supported: send %s", f.name, f.use)
		}
	}
	raw := bytes.TrimSpace(req.ToolChoice)
	if len(raw) == 0 || string(raw) == "null" || string(raw) == `"none"` {
		return nil
	}
	if len(tools) == 0 {
		return badRequest("tool_choice", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified (tool_choice %s needs tools to call)", raw)
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &named) != nil {
		return nil // "auto" or "required"
	}
	for _, t := range tools {
		var v struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &v) == nil && v.Function.Name == named.Function.Name {
			return nil
		}
	}
	return badRequest("tool_choice", "tool_choice names the function %q, which is not in tools", named.Function.Name)
}

// stopStrings reads stop: a string, an array of up to 4 strings (OpenAI's bound), or null;
// empty strings stop nothing and are dropped.
func stopStrings(raw json.RawMessage) ([]string, error) {
	list, err := protocol.StopStrings(raw)
	if err != nil || len(list) > 4 {
		return nil, badRequest("stop", "stop must be a string or an array of at most 4 strings")
	}
	var out []string
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// decodeJSON decodes body into v with encoding/json and, when it does not
// decode, says what is wrong in the client's terms: where (line, column,
// byte offset), which field (a path such as messages[2].content), what was
// expected and what was found, in OpenAI's error shape (param is the
// field). The decoder's own texts ("invalid character '\x00' looking for
// beginning of value", "json: slice unexpected end of JSON input") name
// neither the field nor the place.
func decodeJSON(body []byte, v any, what string) *APIError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "the request body is empty: send %s as a JSON object", what)
	}
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return badRequest("", "the request body is not valid JSON: %s", describeSyntaxError(body, se))
	case errors.As(err, &te):
		path := jsonPathAt(body, te.Offset)
		got := te.Value
		if f, ok := strings.CutPrefix(got, "number "); ok {
			got = "the number " + f
		} else {
			got = "a JSON " + got
		}
		if path == "" {
			return badRequest("", "the request body must be %s (%s), got %s", expectedJSON(te.Type), what, got)
		}
		return badRequest(path, "%s: expected %s, got %s (%s)", path, expectedJSON(te.Type), got, location(body, te.Offset))
	}
	return badRequest("", "the request body is not %s: %v", what, err)
}

// describeSyntaxError turns a JSON syntax error into a sentence naming the
// offending byte, what the parser was looking for, and where.
func describeSyntaxError(body []byte, se *json.SyntaxError) string {
	msg := se.Error()
	if msg == "unexpected end of JSON input" {
		return fmt.Sprintf("the body ends after %d bytes, before the JSON value is complete (a truncated body?)", len(body))
	}
	found := ""
	if i := se.Offset - 1; i >= 0 && i < int64(len(body)) {
		c := body[i]
		switch {
		case c >= 0x20 && c < 0x7f:
			found = fmt.Sprintf("unexpected character %q", rune(c))
		default:
			found = fmt.Sprintf("unexpected byte 0x%02x", c)
		}
	}
	context := "" // the decoder's description of where it was
	if _, after, ok := strings.Cut(msg, "' "); ok {
		context = after
	}
	for _, m := range []struct{ prefix, say string }{
		{"looking for beginning of value", "where a JSON value should start"},
		{"looking for beginning of object key string", "where an object key (a quoted string) should start"},
		{"after object key:value pair", "after a key: value pair, where ',' or '}' should follow"},
		{"after object key", "after an object key, where ':' should follow"},
		{"after array element", "after an array element, where ',' or ']' should follow"},
		{"in string literal", `inside a string (control characters must be escaped: \n, \t, \u0000, …)`},
		{"in string escape code", `in a string escape (valid: \" \\ \/ \b \f \n \r \t \uXXXX)`},
		{`in \u hexadecimal character escape`, `in a \uXXXX escape (four hexadecimal digits)`},
		{"in numeric literal", "inside a number"},
		{"in literal", "inside a literal (true, false or null)"},
		{"after top-level value", "after the end of the JSON value (the body must hold exactly one JSON object)"},
	} {
		if strings.HasPrefix(context, m.prefix) {
			context = m.say
			break
		}
	}
	if found == "" {
		return fmt.Sprintf("%s (%s)", msg, location(body, se.Offset))
	}
	return fmt.Sprintf("%s %s, at %s", found, context, location(body, se.Offset))
}

// location is "line L, column C, byte B" of the byte before offset (where
// encoding/json's offsets point just past the offending byte).
func location(body []byte, offset int64) string {
	at := min(max(offset-1, 0), int64(len(body)))
	line, col := 1, 1
	for _, c := range body[:at] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Sprintf("line %d, column %d, byte %d", line, col, at)
}

// expectedJSON names the JSON a Go type decodes from.
func expectedJSON(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return t.String()
}

// jsonPathAt returns the path (messages[2].content) of the value whose first
// token ends at or after offset in body, "" for the top-level value.
func jsonPathAt(body []byte, offset int64) string {
	type frame struct {
		obj     bool
		key     string
		idx     int
		wantKey bool
	}
	var st []frame
	path := func() string {
		var b strings.Builder
		for i, f := range st {
			if f.obj {
				if i > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.idx)
			}
		}
		return b.String()
	}
	done := func() {
		if n := len(st); n > 0 {
			if st[n-1].obj {
				st[n-1].wantKey = true
			} else {
				st[n-1].idx++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		inKey := len(st) > 0 && st[len(st)-1].obj && st[len(st)-1].wantKey
		tok, err := dec.Token()
		if err != nil {
			return path()
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			st = st[:len(st)-1]
			done()
			continue
		}
		if inKey {
			st[len(st)-1].key, _ = tok.(string)
			st[len(st)-1].wantKey = false
			continue
		}
		if dec.InputOffset() >= offset {
			return path()
		}
		if d, ok := tok.(json.Delim); ok {
			st = append(st, frame{obj: d == '{', wantKey: d == '{'})
			continue
		}
		done()
	}
}
