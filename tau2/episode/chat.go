package episode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"tau2rl/lib/inference/llm"
	"tau2rl/schemas"
)

// chatTools converts OpenAI tool schemas (τ²'s json.dumps form) to go-openai
// tools, keeping the parameters' key order (json.RawMessage is sent
// verbatim).
func chatTools(schemas []json.RawMessage) ([]openai.Tool, error) {
	out := make([]openai.Tool, 0, len(schemas))
	for i, s := range schemas {
		var t struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(s, &t); err != nil {
			return nil, fmt.Errorf("episode: tool %d schema: %w", i, err)
		}
		if t.Function.Name == "" {
			return nil, fmt.Errorf("episode: tool %d schema has no function name", i)
		}
		params := t.Function.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type": "object", "properties": {}}`)
		}
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Function.Name, Description: t.Function.Description, Parameters: params}})
	}
	return out, nil
}

// chatToolCalls converts τ² tool calls to the OpenAI wire form.
func chatToolCalls(calls []schemas.ToolCall) []openai.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]openai.ToolCall, len(calls))
	for i, tc := range calls {
		out[i] = openai.ToolCall{ID: tc.ID, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: tc.Name, Arguments: argsOrEmpty(tc.Arguments)}}
	}
	return out
}

// fromChatToolCalls reads a response's tool calls; ids missing from the
// response get prefix+index. It reports whether every call's arguments are a
// JSON object.
func fromChatToolCalls(calls []openai.ToolCall, requestor, prefix string) ([]schemas.ToolCall, bool) {
	if len(calls) == 0 {
		return nil, true
	}
	ok := true
	out := make([]schemas.ToolCall, len(calls))
	for i, tc := range calls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("%s_%d", prefix, i)
		}
		args := tc.Function.Arguments
		if t := bytes.TrimSpace([]byte(args)); len(t) > 0 && (t[0] != '{' || !json.Valid(t)) {
			ok = false
		}
		out[i] = schemas.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args, Requestor: requestor}
		if out[i].Name == "" {
			ok = false
			out[i].Name = "(missing)"
		}
	}
	return out, ok
}

// ChatAgentFactory builds chat-mode agents on an OpenAI-compatible API
// (baselines and `tau2-eval run` against hosted models). Nothing is
// recorded at token level.
type ChatAgentFactory struct {
	Chat  *llm.Chat
	Model string
	// Args are extra body fields of every request (e.g. reasoning_effort,
	// chat_template_kwargs); they override the request's sampling.
	Args map[string]any
	// SendSeed passes the trial seed ("seed").
	SendSeed bool
}

// NewAgent implements AgentFactory.
func (f *ChatAgentFactory) NewAgent(spec AgentSpec) (Agent, error) {
	if f.Chat == nil {
		return nil, errors.New("episode: chat agent needs a chat client")
	}
	tools, err := chatTools(spec.Tools)
	if err != nil {
		return nil, err
	}
	a := &chatAgent{f: f, spec: spec, tools: tools}
	a.history = append(a.history, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: spec.System})
	for _, m := range spec.Initial {
		a.history = append(a.history, chatMessage(m))
	}
	for _, m := range spec.History {
		a.history = append(a.history, chatMessage(m))
	}
	return a, nil
}

func chatMessage(m schemas.Message) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: string(m.Role), Content: m.Content, ToolCalls: chatToolCalls(m.ToolCalls), ToolCallID: m.ToolCallID}
}

type chatAgent struct {
	f       *ChatAgentFactory
	spec    AgentSpec
	tools   []openai.Tool
	history []openai.ChatCompletionMessage
	calls   int
}

func (a *chatAgent) Act(ctx context.Context, in []schemas.Message) (AgentTurn, error) {
	for _, m := range in {
		a.history = append(a.history, chatMessage(m))
	}
	tag := a.spec.Tag
	tag.Role, tag.Call = "a", a.calls
	a.calls++
	req := llm.ChatRequest{ChatCompletionRequest: openai.ChatCompletionRequest{
		Model: a.f.Model, Messages: a.history, Tools: a.tools, User: tag.String(),
	}}
	if len(a.tools) > 0 {
		req.ToolChoice = "auto"
		if a.spec.ToolChoiceRequired {
			req.ToolChoice = "required"
		}
	}
	temp := float32(a.spec.Sampling.Temperature)
	req.Temperature = &temp
	if a.spec.Sampling.TopP > 0 {
		p := float32(a.spec.Sampling.TopP)
		req.TopP = &p
	}
	if a.spec.Sampling.MaxTokens > 0 {
		req.MaxCompletionTokens = a.spec.Sampling.MaxTokens
	}
	if a.f.SendSeed {
		s := int(a.spec.Seed)
		req.Seed = &s
	}
	req.Extra = maps.Clone(a.f.Args)
	start := time.Now()
	res, err := a.f.Chat.Complete(ctx, req)
	if err != nil {
		return AgentTurn{}, fmt.Errorf("episode: agent chat call: %w", err)
	}
	lat := time.Since(start)
	cm := res.Choices[0].Message
	calls, argsOK := fromChatToolCalls(cm.ToolCalls, schemas.RequestorAssistant, fmt.Sprintf("call_%d", tag.Call))
	turn := AgentTurn{Latency: lat, PromptTokens: res.Usage.PromptTokens, CompletionTokens: res.Usage.CompletionTokens,
		Message: schemas.Message{Role: schemas.RoleAssistant, Content: cm.Content, Reasoning: cm.ReasoningContent, ToolCalls: calls}}
	switch {
	case !argsOK:
		turn.Invalid = "tool call arguments are not a JSON object"
	case cm.Content == "" && len(calls) == 0:
		turn.Invalid = "empty message"
	}
	// Keep what the model said, with the ids we use, in its history.
	a.history = append(a.history, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: cm.Content, ToolCalls: chatToolCalls(calls)})
	return turn, nil
}

// UserSpec is what a user simulator is built from for one episode.
type UserSpec struct {
	// System is τ²'s user-simulator system prompt (guidelines + scenario).
	System string
	// Tools are the user's tool schemas (telecom device, mock inbox); nil
	// when the domain gives the user no tools.
	Tools []json.RawMessage
	// History is the user's view of a task's message_history (τ²'s
	// is_valid_user_history_message filter: its own messages, the agent's
	// text, results of its own tool calls), in its history before the
	// first call's input.
	History []schemas.Message
	Seed    int64
	Tag     Tag
}

// UserTurn is one user-simulator message.
type UserTurn struct {
	// Message has Role user, Content and/or ToolCalls (requestor "user").
	Message schemas.Message
	Latency time.Duration
}

// User is the user simulator. Respond receives the messages addressed to
// the user since its last turn (the agent's text, or the results of its own
// tool calls) and returns its next message.
type User interface {
	Respond(ctx context.Context, in []schemas.Message) (UserTurn, error)
}

// UserFactory builds a fresh user simulator per episode.
type UserFactory interface {
	NewUser(spec UserSpec) (User, error)
}

// ChatUserFactory builds τ²'s LLM user simulator on an OpenAI-compatible
// chat API (AReaL: user_llm_base_url, user_llm, user_llm_args).
type ChatUserFactory struct {
	Chat  *llm.Chat
	Model string
	// Args are sent as extra body fields (τ²'s llm_args; default
	// temperature 0). top_p 1.0 is added when absent, as AReaL does.
	Args map[string]any
	// SendSeed passes the trial seed ("seed"), as τ² does.
	SendSeed bool
}

// NewUser implements UserFactory.
func (f *ChatUserFactory) NewUser(spec UserSpec) (User, error) {
	if f.Chat == nil {
		return nil, errors.New("episode: user simulator needs a chat client")
	}
	tools, err := chatTools(spec.Tools)
	if err != nil {
		return nil, err
	}
	u := &chatUser{f: f, spec: spec, tools: tools,
		history: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleSystem, Content: spec.System}}}
	for i, m := range spec.History {
		cm, err := flipRole(m)
		if err != nil {
			return nil, fmt.Errorf("episode: user simulator history %d: %w", i, err)
		}
		u.history = append(u.history, cm)
	}
	return u, nil
}

// flipRole is τ²'s UserState.flip_roles for one message: the simulator's
// own messages become "assistant" (with their tool calls), the agent's text
// becomes "user", results of its own tool calls stay "tool". Agent tool
// calls and their results must never reach the user.
func flipRole(m schemas.Message) (openai.ChatCompletionMessage, error) {
	switch m.Role {
	case schemas.RoleUser:
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: m.Content, ToolCalls: chatToolCalls(m.ToolCalls)}, nil
	case schemas.RoleAssistant:
		if len(m.ToolCalls) > 0 {
			return openai.ChatCompletionMessage{}, errors.New("agent tool calls must not reach the user")
		}
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: m.Content}, nil
	case schemas.RoleTool:
		if m.Requestor != schemas.RequestorUser {
			return openai.ChatCompletionMessage{}, errors.New("results of agent tool calls must not reach the user")
		}
		return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, Content: m.Content, ToolCallID: m.ToolCallID}, nil
	}
	return openai.ChatCompletionMessage{}, fmt.Errorf("unexpected %s message", m.Role)
}

type chatUser struct {
	f       *ChatUserFactory
	spec    UserSpec
	tools   []openai.Tool
	history []openai.ChatCompletionMessage
	calls   int
}

// Respond implements User. The history is role-flipped as τ²'s flip_roles
// does: the agent's text arrives as "user", the simulator's own messages are
// "assistant", its tool results "tool".
func (u *chatUser) Respond(ctx context.Context, in []schemas.Message) (UserTurn, error) {
	for _, m := range in {
		if m.Role == schemas.RoleUser {
			return UserTurn{}, fmt.Errorf("episode: user simulator: unexpected %s message", m.Role)
		}
		cm, err := flipRole(m)
		if err != nil {
			return UserTurn{}, fmt.Errorf("episode: user simulator: %w", err)
		}
		u.history = append(u.history, cm)
	}
	tag := u.spec.Tag
	tag.Role, tag.Call = "u", u.calls
	u.calls++
	req := llm.ChatRequest{ChatCompletionRequest: openai.ChatCompletionRequest{
		Model: u.f.Model, Messages: u.history, Tools: u.tools, User: tag.String(),
	}}
	if len(u.tools) > 0 {
		req.ToolChoice = "auto"
	}
	req.Extra = maps.Clone(u.f.Args)
	if req.Extra == nil {
		req.Extra = map[string]any{}
	}
	if _, ok := req.Extra["top_p"]; !ok {
		req.Extra["top_p"] = 1.0
	}
	if _, ok := req.Extra["seed"]; !ok && u.f.SendSeed {
		req.Extra["seed"] = u.spec.Seed
	}
	start := time.Now()
	res, err := u.f.Chat.Complete(ctx, req)
	if err != nil {
		return UserTurn{}, fmt.Errorf("episode: user simulator call: %w", err)
	}
	cm := res.Choices[0].Message
	calls, _ := fromChatToolCalls(cm.ToolCalls, schemas.RequestorUser, fmt.Sprintf("user_call_%d", tag.Call))
	if cm.Content == "" && len(calls) == 0 {
		return UserTurn{}, fmt.Errorf("episode: user simulator: %w: empty message", llm.ErrBadResponse)
	}
	u.history = append(u.history, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: cm.Content, ToolCalls: chatToolCalls(calls)})
	return UserTurn{Latency: time.Since(start),
		Message: schemas.Message{Role: schemas.RoleUser, Content: cm.Content, ToolCalls: calls}}, nil
}
