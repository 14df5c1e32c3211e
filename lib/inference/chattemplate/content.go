package chattemplate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ContentText reads an OpenAI chat message's content field — a string, null (or absent), or an
// array of {"type": "text", "text": …} parts — as the text the template renders. Every server that
// accepts OpenAI chat requests (the sampler, the capture proxy, the scripted test server) reads
// content through it, so they accept and refuse the same requests. Non-text parts are refused:
// the policy reads text only.
func ContentText(raw json.RawMessage) (string, error) {
	return JoinContentText(raw, "")
}

// JoinContentText is ContentText with the text parts joined by sep. Serving engines flatten a
// list of text parts for a string-content template (Qwen3's) differently — SGLang with " "
// (jinja_template_utils.process_content_for_template_format), vLLM with "\n"
// (chat_utils._parse_chat_message_content_parts) — so a server that must render as one of them
// says which.
func JoinContentText(raw json.RawMessage, sep string) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("content: %w", err)
		}
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content must be a string, null or an array of text parts")
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("content part %d of type %q is not supported (text only)", i, p.Type)
		}
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// WireMessage is one message of an OpenAI chat request as a server receives it: content still
// raw (ContentText reads it) and tool-call arguments as sent (a JSON string, as OpenAI clients
// send them, or an object; FunctionCall renders both).
type WireMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	ToolCallID       string          `json:"tool_call_id"`
	ToolCalls        []ToolCall      `json:"tool_calls"`
}

// FromWire reads a chat request's messages into the template's: the servers that render
// OpenAI chat requests with Qwen3's template (tau2-sampler, the scripted test server) accept and
// refuse the same messages. An error names the message ("messages[2]: …").
func FromWire(wire []WireMessage) ([]Message, error) {
	msgs := make([]Message, len(wire))
	for i, m := range wire {
		text, err := ContentText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %v", i, err)
		}
		msgs[i] = Message{Role: m.Role, Content: text, ReasoningContent: m.ReasoningContent, ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls}
	}
	return msgs, nil
}
