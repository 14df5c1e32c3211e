package episode

import (
	"fmt"
	"strings"
	"time"

	"tau2rl/schemas"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/pyjson"
)

// resumption is the state τ²'s Orchestrator.initialize derives from a task's
// initial_state.message_history: the trajectory's first messages, each
// participant's view of them, and who speaks next.
type resumption struct {
	// hist is the history as the evaluator parsed it (replayed into the
	// environment by set_state).
	hist []evaluator.Message
	// msgs is the history in trajectory form, with τ²'s synthetic
	// timestamps.
	msgs []schemas.Message
	// agentView and userView are the histories the agent and the user
	// simulator start with (τ²'s is_valid_agent_history_message and
	// is_valid_user_history_message filters, over the slice initialize
	// hands each of them).
	agentView, userView []schemas.Message
	// pending is the message handed over by the first step: the history's
	// last message.
	pending  []schemas.Message
	from, to role
	// termination is set when the history already ends the episode (a user
	// stop token; a solo agent's ###STOP###).
	termination string
}

// parseHistory reads a task's message_history with the evaluator's τ²
// message parser; nil when the task has none (τ²: None or []).
func parseHistory(task *data.Task) ([]evaluator.Message, error) {
	st := task.InitialState
	if st == nil || len(st.MessageHistory) == 0 {
		return nil, nil
	}
	raw := make([]any, len(st.MessageHistory))
	for i, o := range st.MessageHistory {
		if o != nil {
			raw[i] = o
		}
	}
	hist, err := evaluator.ParseMessages(raw)
	if err != nil {
		return nil, fmt.Errorf("task %s: message_history: %w", task.ID, err)
	}
	return hist, nil
}

// validateHistory is τ²'s Orchestrator.validate_message_history: only
// assistant, user and tool messages; every assistant and user message has
// content or tool calls; the n tool calls of a message are followed by
// tool messages whose requestor is that message's role. Like τ², it does
// not reset the count of expected tool messages at a text message (τ²'s
// `num_expected_tool_messages == 0` there is a comparison, not an
// assignment), so a later tool-call message still reports the missing
// ones.
func validateHistory(hist []evaluator.Message) error {
	expected, requestor := 0, ""
	for i := range hist {
		m := &hist[i]
		switch {
		case m.ToolMessages != nil || (m.Role != evaluator.RoleAssistant && m.Role != evaluator.RoleUser && m.Role != evaluator.RoleTool):
			kind := m.Role + " message"
			if m.ToolMessages != nil {
				kind = "multi-tool message"
			}
			return fmt.Errorf("message_history %d: invalid message type (a %s)", i, kind)
		case m.Role == evaluator.RoleTool:
			if expected == 0 || requestor == "" {
				return fmt.Errorf("message_history %d: no tool messages expected", i)
			}
			if m.Requestor != requestor {
				return fmt.Errorf("message_history %d: got tool message from %s, expected %s", i, m.Requestor, requestor)
			}
			expected--
		default:
			if !m.HasTextContent() && !m.IsToolCall() {
				return fmt.Errorf("message_history %d: %s message must have either content or tool_calls", i, m.Role)
			}
			if m.IsToolCall() {
				if expected > 0 {
					return fmt.Errorf("message_history %d: %d tool messages are missing, got a %s message", i, expected, m.Role)
				}
				expected, requestor = len(m.ToolCalls), m.Role
			} else {
				requestor = ""
			}
		}
	}
	return nil
}

// agentVisible is τ²'s is_valid_agent_history_message: assistant messages,
// user text messages, and results of the agent's own tool calls.
func agentVisible(m *evaluator.Message) bool {
	switch m.Role {
	case evaluator.RoleAssistant:
		return true
	case evaluator.RoleUser:
		return !m.IsToolCall()
	case evaluator.RoleTool:
		return m.ToolMessages == nil && m.Requestor == env.Assistant
	}
	return false
}

// userVisible is τ²'s is_valid_user_history_message: user messages,
// assistant text messages, and results of the user's own tool calls.
func userVisible(m *evaluator.Message) bool {
	switch m.Role {
	case evaluator.RoleUser:
		return true
	case evaluator.RoleAssistant:
		return !m.IsToolCall()
	case evaluator.RoleTool:
		return m.ToolMessages == nil && m.Requestor == env.User
	}
	return false
}

// trajectoryMessage converts a parsed history message to the trajectory's
// form. Tool-call arguments are written as τ² sends them to LLMs,
// json.dumps(arguments); the message was not produced by the policy
// (CallIndex -1).
func trajectoryMessage(m *evaluator.Message) (schemas.Message, error) {
	sm := schemas.Message{Role: schemas.Role(m.Role), CallIndex: -1}
	if m.Content != nil {
		sm.Content = *m.Content
	}
	if m.Role == evaluator.RoleTool {
		sm.ToolCallID, sm.Requestor, sm.ToolError = m.ID, m.Requestor, m.Error
		return sm, nil
	}
	for k, tc := range m.ToolCalls {
		args := "{}"
		if tc.Arguments != nil {
			var err error
			if args, err = pyjson.Dumps(tc.Arguments); err != nil {
				return schemas.Message{}, fmt.Errorf("tool call %d (%s) arguments: %w", k, tc.Name, err)
			}
		}
		req := tc.Requestor
		if req == "" {
			req = env.Assistant
		}
		sm.ToolCalls = append(sm.ToolCalls, schemas.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: args, Requestor: req})
	}
	return sm, nil
}

// newResumption is the message-history branch of τ²'s
// Orchestrator.initialize for a parsed, validated history (the environment
// replay is the caller's). now is the episode's start: as τ²'s
// _add_timestamps does, message i of n is stamped now − n s + i s, so the
// history sorts before everything the episode adds.
//
// Routing follows the last message: an assistant message goes to the user
// (text) or the environment (tool calls); a user message to the agent
// (text) or the environment; a tool message back to its requestor. The
// participant that speaks next starts with the history up to, not
// including, the last message, which it then receives as its input; the
// other one starts with the whole history; each through its own filter.
// A user text message with a stop token ends the episode at once
// (user_stop), as does a solo agent's ###STOP### (agent_stop).
func newResumption(hist []evaluator.Message, solo bool, now time.Time) (*resumption, error) {
	n := len(hist)
	res := &resumption{hist: hist, msgs: make([]schemas.Message, n)}
	start := now.Add(-time.Duration(n) * time.Second)
	for i := range hist {
		m, err := trajectoryMessage(&hist[i])
		if err != nil {
			return nil, fmt.Errorf("message_history %d: %w", i, err)
		}
		m.Timestamp = start.Add(time.Duration(i) * time.Second)
		res.msgs[i] = m
	}
	last := &hist[n-1]
	if last.IsToolCall() && len(last.ToolCalls) == 0 {
		// τ² would execute no calls and then index the empty result list.
		return nil, fmt.Errorf("message_history %d: the last message has an empty tool_calls list", n-1)
	}
	agentUpTo, userUpTo := n, n // how much of the history each view covers
	switch last.Role {
	case evaluator.RoleAssistant:
		res.from, res.to = roleAgent, roleUser
		if last.IsToolCall() {
			res.to = roleEnv
		}
		userUpTo = n - 1
		if solo && last.Content != nil && strings.Contains(*last.Content, StopToken) {
			res.termination = schemas.TerminationAgentStop
		}
	case evaluator.RoleUser:
		res.from, res.to = roleUser, roleAgent
		if last.IsToolCall() {
			res.to = roleEnv
		}
		agentUpTo = n - 1
		if last.Content != nil && IsUserStop(*last.Content, last.IsToolCall()) {
			res.termination = schemas.TerminationUserStop
		}
	case evaluator.RoleTool:
		res.from = roleEnv
		if last.Requestor == env.Assistant {
			res.to = roleAgent
			agentUpTo = n - 1
		} else {
			res.to = roleUser
			userUpTo = n - 1
		}
	default:
		return nil, fmt.Errorf("message_history %d: the last message must be an assistant, user or tool message, got %s", n-1, last.Role)
	}
	if solo && res.to == roleUser && res.termination == "" {
		// τ²'s DummyUser raises when asked for a message.
		return nil, fmt.Errorf("message_history: solo mode has no user, but the history hands the turn to the user")
	}
	for i := range hist {
		if i < agentUpTo && agentVisible(&hist[i]) {
			res.agentView = append(res.agentView, res.msgs[i])
		}
		if i < userUpTo && userVisible(&hist[i]) {
			res.userView = append(res.userView, res.msgs[i])
		}
	}
	res.pending = []schemas.Message{res.msgs[n-1]}
	return res, nil
}
