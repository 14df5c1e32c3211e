package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"strings"
	"sync"

	gojson "github.com/goccy/go-json"

	"tau2rl/lib/inference/chattemplate"
)

// ChatRequest is the part of OpenAI's chat-completions request the proxy
// reads. Other fields (user, metadata, store, frequency_penalty, …) are
// accepted and ignored, as vLLM and SGLang do, so unmodified clients work.
type ChatRequest struct {
	Model               string            `json:"model"`
	Messages            []ChatMessage     `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls"`
	Stream              bool              `json:"stream"`
	StreamOptions       *StreamOptions    `json:"stream_options"`
	N                   *int              `json:"n"`
	Stop                json.RawMessage   `json:"stop"`
	Temperature         *float64          `json:"temperature"`
	TopP                *float64          `json:"top_p"`
	TopK                *int              `json:"top_k"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Seed                *int64            `json:"seed"`
	Logprobs            *bool             `json:"logprobs"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs"`
}

// StreamOptions is OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one OpenAI message. Content is a string, null, or an array
// of content parts (only text parts are accepted).
type ChatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []WireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	Name             string          `json:"name,omitempty"`
}

// WireToolCall is a tool call as OpenAI sends it: arguments are a JSON
// string holding the JSON object.
type WireToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// APIError is an error answered in OpenAI's shape: {"error": {"message",
// "type", "param", "code"}} with the HTTP status clients branch on.
type APIError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
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
	body := map[string]any{"message": e.Message, "type": e.Type, "param": nil, "code": nil}
	if e.Param != "" {
		body["param"] = e.Param
	}
	if e.Code != "" {
		body["code"] = e.Code
	}
	writeJSON(w, e.Status, map[string]any{"error": body})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// asAPIError turns any error into an APIError (500 when it is not one).
func asAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	return &APIError{Status: http.StatusInternalServerError, Type: errServer, Message: err.Error()}
}

// contentText reads a message's content: a string, null, or text parts.
func contentText(raw json.RawMessage, param string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := gojson.Unmarshal(raw, &s); err != nil {
			return "", badRequest(param, "content: %v", err)
		}
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := gojson.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(param, "content must be a string, null or an array of text parts")
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", badRequest(fmt.Sprintf("%s[%d]", param, i), "content part of type %q is not supported (the policy reads text)", p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
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
		text, err := contentText(m.Content, param+".content")
		if err != nil {
			return nil, err
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

// stopStrings reads stop: a string, an array of up to 4 strings, or null.
func stopStrings(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil || len(list) > 4 {
		return nil, badRequest("stop", "stop must be a string or an array of at most 4 strings")
	}
	out := list[:0]
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}
