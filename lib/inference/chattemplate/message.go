package chattemplate

import (
	"encoding/json"
	"fmt"
)

// Roles the Qwen3 template renders.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one chat message in the OpenAI shape the Qwen3 template reads.
// Its JSON form is what transformers' apply_chat_template receives.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent, when non-nil, is the assistant's thinking (the
	// template's `reasoning_content is defined and not none`); when nil the
	// template looks for <think>…</think> inside Content instead.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool result to its call. The template ignores it;
	// it is kept for callers that also send messages to chat APIs.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ToolCall is an assistant's function call in OpenAI form.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as raw JSON.
// An object (the usual case, and what Qwen3 generates) is rendered with
// tojson; a JSON string is the template's `arguments is string` branch and
// is rendered verbatim, unquoted, as OpenAI-format clients send it.
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Tool builds the OpenAI tool object {"type": "function", "function":
// {"name", "description", "parameters"}} with keys in that order (the order
// τ²'s Tool.openai_schema produces, which the template's tojson preserves).
// parameters must be a JSON object.
func Tool(name, description string, parameters json.RawMessage) (json.RawMessage, error) {
	if !json.Valid(parameters) {
		return nil, fmt.Errorf("chattemplate: tool %s: parameters are not valid JSON", name)
	}
	n, _ := json.Marshal(name)
	d, _ := json.Marshal(description)
	out := make([]byte, 0, len(parameters)+len(n)+len(d)+64)
	out = append(out, `{"type":"function","function":{"name":`...)
	out = append(out, n...)
	out = append(out, `,"description":`...)
	out = append(out, d...)
	out = append(out, `,"parameters":`...)
	out = append(out, parameters...)
	out = append(out, "}}"...)
	return out, nil
}

// Ptr returns a pointer to s, for Message.ReasoningContent literals.
func Ptr(s string) *string { return &s }
