package evaluator

import (
	"fmt"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// Message roles of τ²'s data_model/message.py.
const (
	RoleSystem    = "system"
	RoleAssistant = "assistant"
	RoleUser      = "user"
	RoleTool      = "tool"
)

// Message is one entry of a τ² trajectory: an AssistantMessage,
// UserMessage, ToolMessage, SystemMessage or MultiToolMessage, reduced to
// the fields grading reads. Producers build these from their episodes;
// results files are parsed into them with ParseMessage.
type Message struct {
	// Role is "assistant", "user", "tool" or "system".
	Role string
	// Content is the text (nil = Python None).
	Content *string
	// ToolCalls are an assistant or user message's tool calls. nil is τ²'s
	// None ("not a tool call"); an empty non-nil slice is a tool-call
	// message with no calls (τ²'s is_tool_call() is `tool_calls is not None`).
	ToolCalls []ToolCall
	// ID, Requestor and Error are a ToolMessage's fields: the id of the
	// call it answers, who called ("assistant" or "user") and whether the
	// tool failed.
	ID        string
	Requestor string
	Error     bool
	// ToolMessages is set (non-nil) only for a MultiToolMessage, which τ²
	// uses in memory and never stores in trajectories.
	ToolMessages []Message
}

// IsToolCall is τ²'s is_tool_call(): an assistant or user message whose
// tool_calls is not None.
func (m *Message) IsToolCall() bool {
	return (m.Role == RoleAssistant || m.Role == RoleUser) && m.ToolCalls != nil
}

// HasTextContent is τ²'s has_text_content(): content is not None and not
// only whitespace (Python's str.strip()).
func (m *Message) HasTextContent() bool {
	return m.Content != nil && pyjson.Strip(*m.Content) != ""
}

// ToolCall is τ²'s ToolCall.
type ToolCall struct {
	ID   string
	Name string
	// Arguments are the decoded JSON arguments (τ²'s arguments dict). nil
	// means the call's raw arguments could not be decoded (see
	// RawArguments); τ² itself aborts such an episode, the Go environment
	// answers it with a tool error.
	Arguments *pyjson.Object
	// RawArguments is the LLM's argument text. It is used only when
	// Arguments is nil, to replay the call exactly as the live environment
	// saw it (env.Environment.Call).
	RawArguments string
	// Requestor is "assistant" (default) or "user".
	Requestor string
}

// Text returns a pointer to s, for building messages.
func Text(s string) *string { return &s }

// NewToolCall builds a tool call from raw LLM argument text, decoding it
// like env.Environment.Call: on a decoding error Arguments stays nil and
// the text is kept in RawArguments.
func NewToolCall(id, name, argsJSON, requestor string) ToolCall {
	tc := ToolCall{ID: id, Name: name, RawArguments: argsJSON, Requestor: requestor}
	if a, err := env.DecodeArguments(argsJSON); err == nil {
		tc.Arguments = a
	}
	return tc
}

// ParseMessages validates a JSON list of τ² messages (a trajectory, or a
// task's message_history) as pydantic would for the Message union.
func ParseMessages(v any) ([]Message, error) {
	if v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("messages: expected a list, got %s", pyjson.TypeName(v))
	}
	out := make([]Message, len(l))
	for i, mv := range l {
		m, err := ParseMessage(mv)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out[i] = m
	}
	return out, nil
}

// ParseMessage validates one τ² message object. The role selects the
// model; a "tool" object with tool_messages is a MultiToolMessage. Fields
// that grading does not read (timestamps, costs, usage, audio) are not
// validated beyond being present in the object.
func ParseMessage(v any) (Message, error) {
	o, ok := v.(*pyjson.Object)
	if !ok {
		return Message{}, fmt.Errorf("expected an object, got %s", pyjson.TypeName(v))
	}
	role, err := reqStr(o, "role")
	if err != nil {
		return Message{}, err
	}
	m := Message{Role: role}
	switch role {
	case RoleSystem, RoleAssistant, RoleUser:
		if m.Content, err = optStr(o, "content"); err != nil {
			return Message{}, err
		}
		if role == RoleSystem {
			return m, nil
		}
		tv, _ := o.Get("tool_calls")
		if tv == nil {
			return m, nil
		}
		tl, ok := tv.([]any)
		if !ok {
			return Message{}, fmt.Errorf("tool_calls: expected a list, got %s", pyjson.TypeName(tv))
		}
		m.ToolCalls = make([]ToolCall, len(tl))
		for i, cv := range tl {
			tc, err := parseToolCall(cv)
			if err != nil {
				return Message{}, fmt.Errorf("tool_calls.%d: %w", i, err)
			}
			m.ToolCalls[i] = tc
		}
		return m, nil
	case RoleTool:
		if tv, ok := o.Get("tool_messages"); ok && !o.Has("id") {
			l, ok := tv.([]any)
			if !ok {
				return Message{}, fmt.Errorf("tool_messages: expected a list, got %s", pyjson.TypeName(tv))
			}
			m.ToolMessages = make([]Message, len(l))
			for i, sv := range l {
				sm, err := ParseMessage(sv)
				if err != nil {
					return Message{}, fmt.Errorf("tool_messages.%d: %w", i, err)
				}
				if sm.Role != RoleTool || sm.ToolMessages != nil {
					return Message{}, fmt.Errorf("tool_messages.%d: not a tool message", i)
				}
				m.ToolMessages[i] = sm
			}
			return m, nil
		}
		if m.ID, err = reqStr(o, "id"); err != nil {
			return Message{}, err
		}
		if m.Content, err = optStr(o, "content"); err != nil {
			return Message{}, err
		}
		if m.Requestor, err = requestor(o); err != nil {
			return Message{}, err
		}
		if ev, ok := o.Get("error"); ok {
			b, ok := pyjson.LaxBool(ev)
			if !ok {
				return Message{}, fmt.Errorf("error: expected a bool, got %s", pyjson.Repr(ev))
			}
			m.Error = b
		}
		return m, nil
	}
	return Message{}, fmt.Errorf("unknown message role %q", role)
}

func parseToolCall(v any) (ToolCall, error) {
	o, ok := v.(*pyjson.Object)
	if !ok {
		return ToolCall{}, fmt.Errorf("expected an object, got %s", pyjson.TypeName(v))
	}
	var tc ToolCall
	var err error
	if o.Has("id") {
		if tc.ID, err = reqStr(o, "id"); err != nil {
			return ToolCall{}, err
		}
	}
	if tc.Name, err = reqStr(o, "name"); err != nil {
		return ToolCall{}, err
	}
	av, ok := o.Get("arguments")
	if !ok {
		return ToolCall{}, fmt.Errorf("arguments: field required")
	}
	if tc.Arguments, ok = av.(*pyjson.Object); !ok {
		return ToolCall{}, fmt.Errorf("arguments: expected a dict, got %s", pyjson.TypeName(av))
	}
	if tc.Requestor, err = requestor(o); err != nil {
		return ToolCall{}, err
	}
	return tc, nil
}

func reqStr(o *pyjson.Object, key string) (string, error) {
	v, ok := o.Get(key)
	if !ok {
		return "", fmt.Errorf("%s: field required", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: expected a string, got %s", key, pyjson.TypeName(v))
	}
	return s, nil
}

func optStr(o *pyjson.Object, key string) (*string, error) {
	v, _ := o.Get(key)
	if v == nil {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%s: expected a string or null, got %s", key, pyjson.TypeName(v))
	}
	return &s, nil
}

func requestor(o *pyjson.Object) (string, error) {
	v, ok := o.Get("requestor")
	if !ok {
		return env.Assistant, nil
	}
	s, _ := v.(string)
	if s != env.Assistant && s != env.User {
		return "", fmt.Errorf("requestor: expected 'user' or 'assistant', got %s", pyjson.Repr(v))
	}
	return s, nil
}
