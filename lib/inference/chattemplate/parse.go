package chattemplate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Completion is a policy completion split into Qwen3's parts: thinking,
// visible content and tool calls.
type Completion struct {
	// Reasoning is the text of the <think>…</think> block, with the newlines
	// around it trimmed as the template trims them.
	Reasoning string
	// HasThinking is true when the completion contained a </think>.
	HasThinking bool
	// Content is the text outside the thinking block and the tool calls,
	// with surrounding whitespace trimmed.
	Content string
	// ToolCalls are the parsed <tool_call> blocks in order. IDs are empty:
	// the caller assigns them. Arguments hold the generated JSON object.
	ToolCalls []ToolCall
	// Invalid is empty for a well-formed completion, else the reason it is
	// not (the producer counts such turns for invalid_format_penalty).
	Invalid string
}

// Valid reports whether the completion is well-formed.
func (c Completion) Valid() bool { return c.Invalid == "" }

// Message is the completion as an assistant message (the shape AReaL's proxy
// returns: reasoning and content separate, tool calls parsed).
func (c Completion) Message() Message {
	m := Message{Role: RoleAssistant, Content: c.Content, ToolCalls: c.ToolCalls}
	if c.HasThinking {
		m.ReasoningContent = Ptr(c.Reasoning)
	}
	return m
}

// markers that must not appear in a completion's text once the final stop
// token is removed: chat-structure tokens the policy should never write.
var forbiddenMarkers = []string{IMStart, IMEnd, "<|endoftext|>", ToolRespOpen, ToolRespClose}

// ParseCompletion parses the decoded text of a Qwen3 completion (without
// its final stop token) the way SGLang's qwen3 reasoning parser and
// qwen25/hermes tool-call parser read it, but strictly: every malformed
// piece makes the result invalid with a reason instead of being passed
// through as text.
//
// Rules:
//   - Thinking: text up to the first </think> is reasoning; it may start
//     with <think> (after whitespace). A <think> without </think>, a second
//     thinking block, or <think> after other text is invalid.
//   - Tool calls: each <tool_call>BODY</tool_call> must hold one JSON object
//     with a non-empty string "name" and an "arguments" object (absent
//     arguments mean {} as in SGLang). Malformed JSON, a missing or empty
//     name, non-object arguments, an unterminated or nested <tool_call>, or
//     a stray </tool_call> are invalid.
//   - Content: all text outside thinking and tool calls, joined and trimmed.
//   - <|im_start|>, <|im_end|>, <|endoftext|> and <tool_response> tags in
//     the text are invalid (the model is writing chat structure).
//
// Even an invalid result carries everything that parsed, so a caller can
// still show the text to the user simulator.
func ParseCompletion(text string) Completion {
	var c Completion
	invalid := func(format string, args ...any) {
		if c.Invalid == "" {
			c.Invalid = fmt.Sprintf(format, args...)
		}
	}
	for _, m := range forbiddenMarkers {
		if strings.Contains(text, m) {
			invalid("completion contains %s", m)
		}
	}

	rest := text
	if i := strings.Index(rest, ThinkClose); i >= 0 {
		c.HasThinking = true
		pre := rest[:i]
		rest = rest[i+len(ThinkClose):]
		trimmed := strings.TrimLeft(pre, " \t\r\n")
		if strings.HasPrefix(trimmed, ThinkOpen) {
			pre = trimmed[len(ThinkOpen):]
		}
		if strings.Contains(pre, ThinkOpen) {
			invalid("%s after other text", ThinkOpen)
		}
		c.Reasoning = strings.Trim(pre, "\n")
		if strings.Contains(rest, ThinkOpen) || strings.Contains(rest, ThinkClose) {
			invalid("more than one thinking block")
		}
	} else if strings.Contains(rest, ThinkOpen) {
		invalid("unterminated %s", ThinkOpen)
		rest = strings.Replace(rest, ThinkOpen, "", 1)
		c.Reasoning = strings.Trim(rest, "\n")
		c.HasThinking = true
		rest = ""
	}

	var content strings.Builder
	for n := 1; ; n++ {
		open := strings.Index(rest, ToolCallOpen)
		if close := strings.Index(rest, ToolCallClose); close >= 0 && (open < 0 || close < open) {
			invalid("%s without %s", ToolCallClose, ToolCallOpen)
			rest = rest[:close] + rest[close+len(ToolCallClose):]
			n--
			continue
		}
		if open < 0 {
			content.WriteString(rest)
			break
		}
		content.WriteString(rest[:open])
		rest = rest[open+len(ToolCallOpen):]
		end := strings.Index(rest, ToolCallClose)
		if end < 0 {
			invalid("tool call %d: unterminated %s", n, ToolCallOpen)
			break
		}
		body := rest[:end]
		rest = rest[end+len(ToolCallClose):]
		if strings.Contains(body, ToolCallOpen) {
			invalid("tool call %d: nested %s", n, ToolCallOpen)
			continue
		}
		tc, err := parseToolCall(body)
		if err != nil {
			invalid("tool call %d: %v", n, err)
			continue
		}
		c.ToolCalls = append(c.ToolCalls, tc)
	}
	c.Content = strings.TrimSpace(content.String())
	return c
}

// parseToolCall reads one tool-call body: {"name": …, "arguments": {…}}.
func parseToolCall(body string) (ToolCall, error) {
	dec := json.NewDecoder(strings.NewReader(body))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return ToolCall{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if fields == nil {
		return ToolCall{}, fmt.Errorf("body is null, not an object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return ToolCall{}, fmt.Errorf("text after the JSON object")
	}
	var name string
	if raw, ok := fields["name"]; !ok {
		return ToolCall{}, fmt.Errorf(`missing "name"`)
	} else if err := json.Unmarshal(raw, &name); err != nil {
		return ToolCall{}, fmt.Errorf(`"name" is not a string`)
	}
	if strings.TrimSpace(name) == "" {
		return ToolCall{}, fmt.Errorf(`empty "name"`)
	}
	args, ok := fields["arguments"]
	if !ok {
		args = json.RawMessage("{}")
	}
	if t := bytes.TrimSpace(args); len(t) == 0 || t[0] != '{' {
		return ToolCall{}, fmt.Errorf("%s: arguments are not a JSON object", name)
	}
	return ToolCall{Type: "function", Function: FunctionCall{Name: name, Arguments: bytes.Clone(bytes.TrimSpace(args))}}, nil
}

// VisibleText is what a reader of an invalid completion is shown: its text
// (decoded without the final stop token) after the last </think>, trimmed.
// The τ² episode runner shows it to the user simulator and the capture
// proxy returns it as the message content.
func VisibleText(text string) string {
	if i := strings.LastIndex(text, ThinkClose); i >= 0 {
		text = text[i+len(ThinkClose):]
	}
	return strings.TrimSpace(text)
}
