package episode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/schemas"
)

// AgentSpec is what an agent is built from for one episode.
type AgentSpec struct {
	// System is the system prompt (τ²'s agent or solo prompt).
	System string
	// Tools are the OpenAI tool schemas offered, in τ²'s order.
	Tools []json.RawMessage
	// ToolChoiceRequired is set for the solo agent (τ² sends
	// tool_choice="required"); chat agents forward it.
	ToolChoiceRequired bool
	// Initial are fixed messages already in the agent's history before its
	// first call (the greeting): token agents tokenize them once, with the
	// system turn, for every episode that shares them.
	Initial []schemas.Message
	// History is the agent's view of a task's message_history (τ²'s
	// is_valid_agent_history_message filter), in its history after Initial
	// and before the first call's input. It is the episode's own: never
	// part of the cached prefix, and, in token mode, prompt tokens of the
	// first call (not completions), rendered as Qwen3's template renders
	// the conversation.
	History []schemas.Message
	// Sampling are the request's decoding parameters.
	Sampling schemas.SamplingParams
	// Seed is the trial's seed.
	Seed int64
	// Tag identifies the episode in request ids (Role and Call are set per
	// call).
	Tag Tag
}

// AgentTurn is one agent message and, in token mode, the record of the
// policy call that produced it.
type AgentTurn struct {
	// Message is the assistant message as τ² sees it (Content, Reasoning,
	// ToolCalls). CallIndex and Turn are set by the orchestrator.
	Message schemas.Message
	// Call is the token-level record (nil for chat agents).
	Call *schemas.CallInput
	// Invalid is the reason the completion's format is invalid, "" if valid.
	Invalid string
	// PromptTokens and CompletionTokens count tokens (for metrics).
	PromptTokens, CompletionTokens int
	// Latency is the wall time of the LLM call(s).
	Latency time.Duration
}

// Agent is the policy side of an episode. Act receives the messages
// addressed to the agent since its last turn (the user's text, or the
// results of its tool calls; nothing on a solo agent's first call) and
// returns its next message.
type Agent interface {
	Act(ctx context.Context, in []schemas.Message) (AgentTurn, error)
}

// AgentFactory builds a fresh agent per episode.
type AgentFactory interface {
	NewAgent(spec AgentSpec) (Agent, error)
}

// agentMessage converts a message addressed to the agent into the chat form
// the agent's model reads.
func agentMessage(m schemas.Message) chattemplate.Message {
	cm := chattemplate.Message{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
	for _, tc := range m.ToolCalls {
		cm.ToolCalls = append(cm.ToolCalls, chattemplate.ToolCall{ID: tc.ID, Type: "function",
			Function: chattemplate.FunctionCall{Name: tc.Name, Arguments: json.RawMessage(argsOrEmpty(tc.Arguments))}})
	}
	return cm
}

func argsOrEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

// TokenAgentFactory builds token-mode policy agents: prompts are rendered
// with Qwen3's chat template and tokenized here, the server (SGLang
// /generate or vLLM /v1/completions) sees and returns token ids, and every
// call is recorded for training.
type TokenAgentFactory struct {
	Policy    llm.Policy
	Tokenizer *tokenizer.Tokenizer
	// Mode is the history mode (incremental by default, or rerender).
	Mode chattemplate.Mode
	// EnableThinking nil leaves Qwen3 thinking on (AReaL's agent setting);
	// false adds the empty think block.
	EnableThinking *bool
	// EngineMaxTokens bounds prompt + completion of one call (AReaL
	// agent.engine_max_tokens); the completion budget is min(max_tokens,
	// EngineMaxTokens − prompt).
	EngineMaxTokens int
	// DefaultMaxTokens is the completion budget when the request sets none.
	DefaultMaxTokens int
	// Version returns the producer's current policy version, used for
	// tokens whose server weight version is unknown or not a number.
	Version func() int64
	// MaxResumes bounds how often a generation aborted by a weight update is
	// resumed (prompt + tokens so far, remaining budget), AReaL's
	// interruptible generation. Default 8 when 0.
	MaxResumes int
	// SendSeed passes the trial seed to the server's sampler.
	SendSeed bool

	// prefixes caches the tokenized system turn (policy + tools) and the
	// greeting per distinct prompt, so an episode tokenizes only its own
	// turns: the ~7k-token τ² system prompt is the same for every episode
	// of a domain. Prefixes are immutable.
	prefixes chattemplate.PrefixCache
}

// NewAgent implements AgentFactory.
func (f *TokenAgentFactory) NewAgent(spec AgentSpec) (Agent, error) {
	if f.Policy == nil || f.Tokenizer == nil {
		return nil, errors.New("episode: token agent needs a policy client and a tokenizer")
	}
	if f.EngineMaxTokens <= 0 || f.DefaultMaxTokens <= 0 {
		return nil, fmt.Errorf("episode: token agent: engine_max_tokens %d and max_new_tokens %d must be > 0", f.EngineMaxTokens, f.DefaultMaxTokens)
	}
	var stops []int32
	for _, s := range []string{chattemplate.IMEnd, "<|endoftext|>"} {
		if id, ok := f.Tokenizer.AddedTokenID(s); ok {
			stops = append(stops, id)
		}
	}
	return &tokenAgent{f: f, spec: spec, stops: stops}, nil
}

// newHistory starts an agent's history. Incremental histories reuse the
// cached tokenization of the episode-independent prefix (system turn and
// initial messages) and render the rest (spec.History, then first) as
// turns after it; rerender histories are built by chattemplate. Either
// way the first prompt is the template's rendering of the whole
// conversation: a prefix ends with a closed turn, and the history's
// assistant turns are never the last message of a prompt (a prompt ends
// with the turns the agent answers), so the template renders them without
// a thinking block wherever they stand.
func (f *TokenAgentFactory) newHistory(spec AgentSpec, first []chattemplate.Message) (chattemplate.History, error) {
	opts := chattemplate.Options{Tools: spec.Tools, EnableThinking: f.EnableThinking}
	initial := []chattemplate.Message{{Role: chattemplate.RoleSystem, Content: spec.System}}
	for _, m := range spec.Initial {
		initial = append(initial, agentMessage(m))
	}
	if len(spec.History) > 0 {
		hist := make([]chattemplate.Message, 0, len(spec.History)+len(first))
		for _, m := range spec.History {
			hist = append(hist, agentMessage(m))
		}
		first = append(hist, first...)
	}
	if f.Mode != chattemplate.ModeIncremental && f.Mode != "" {
		return chattemplate.New(f.Mode, f.Tokenizer, append(initial, first...), opts)
	}
	prefix, err := f.prefixes.Get(f.Tokenizer, initial, opts)
	if err != nil {
		return nil, err
	}
	return chattemplate.NewIncremental(prefix, first)
}

type tokenAgent struct {
	f     *TokenAgentFactory
	spec  AgentSpec
	h     chattemplate.History
	stops []int32
	calls int
}

func (a *tokenAgent) Act(ctx context.Context, in []schemas.Message) (AgentTurn, error) {
	msgs := make([]chattemplate.Message, 0, len(in))
	for _, m := range in {
		msgs = append(msgs, agentMessage(m))
	}
	if a.h == nil {
		h, err := a.f.newHistory(a.spec, msgs)
		if err != nil {
			return AgentTurn{}, fmt.Errorf("episode: agent history: %w", err)
		}
		a.h = h
	} else if len(msgs) > 0 {
		if err := a.h.AddMessages(msgs...); err != nil {
			return AgentTurn{}, fmt.Errorf("episode: agent history: %w", err)
		}
	}
	prompt := a.h.Prompt()
	budget := a.spec.Sampling.MaxTokens
	if budget <= 0 {
		budget = a.f.DefaultMaxTokens
	}
	budget = min(budget, a.f.EngineMaxTokens-len(prompt))
	if budget <= 0 {
		return AgentTurn{}, fmt.Errorf("%w: %d prompt tokens, engine_max_tokens %d", ErrContextWindow, len(prompt), a.f.EngineMaxTokens)
	}
	tag := a.spec.Tag
	tag.Role, tag.Call = "a", a.calls
	a.calls++
	req := llm.GenerateRequest{
		MaxNewTokens: budget, Temperature: a.spec.Sampling.Temperature, TopP: a.spec.Sampling.TopP,
		TopK: a.spec.Sampling.TopK, StopTokenIDs: a.stops, RequestID: tag.String(),
	}
	if a.f.SendSeed {
		seed := a.spec.Seed
		req.Seed = &seed
	}
	req.InputIDs = prompt
	out, err := a.generate(ctx, req)
	if err != nil {
		return AgentTurn{}, err
	}
	comp, err := a.h.AddCompletion(out.IDs)
	if err != nil {
		return AgentTurn{}, fmt.Errorf("episode: agent completion: %w", err)
	}
	turn := AgentTurn{PromptTokens: len(prompt), CompletionTokens: len(out.IDs), Latency: out.Latency}
	turn.Call = &schemas.CallInput{
		Prompt: prompt, Completion: out.IDs, BehaviorLogprobs: out.Logprobs,
		VersionRuns: schemas.RunsFromVersions(out.Versions), FinishReason: out.Finish,
		LatencyMS: float64(out.Latency.Microseconds()) / 1000,
	}
	invalid := comp.Invalid
	if invalid == "" && comp.Content == "" && len(comp.ToolCalls) == 0 {
		invalid = "empty message"
	}
	msg := schemas.Message{Role: schemas.RoleAssistant, Reasoning: comp.Reasoning}
	if invalid != "" {
		text, err := a.visibleText(out.IDs)
		if err != nil {
			return AgentTurn{}, err
		}
		msg.Content = text
		turn.Invalid = invalid
		turn.Call.InvalidFormat = true
	} else {
		msg.Content = comp.Content
		for k, tc := range comp.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, schemas.ToolCall{ID: fmt.Sprintf("call_%d_%d", tag.Call, k),
				Name: tc.Function.Name, Arguments: string(tc.Function.Arguments), Requestor: schemas.RequestorAssistant})
		}
	}
	turn.Message = msg
	return turn, nil
}

// visibleText is what τ² sees of an invalid completion: its text after the
// thinking block (without the final stop token), trimmed.
func (a *tokenAgent) visibleText(ids []int32) (string, error) {
	body := ids
	if n := len(body); n > 0 && slices.Contains(a.stops, body[n-1]) {
		body = body[:n-1]
	}
	text, err := a.f.Tokenizer.Decode(body)
	if err != nil {
		return "", fmt.Errorf("episode: decode completion: %w", err)
	}
	return chattemplate.VisibleText(text), nil
}

// generate runs one policy call through llm.GenerateResumable: a
// generation aborted by a weight update is resumed, so one completion may
// span several policy versions, recorded per token.
func (a *tokenAgent) generate(ctx context.Context, req llm.GenerateRequest) (llm.Generation, error) {
	g, err := llm.GenerateResumable(ctx, a.f.Policy, req, llm.ResumeOptions{MaxResumes: a.f.MaxResumes, Version: a.f.Version})
	if err != nil {
		return g, fmt.Errorf("episode: policy call: %w", err)
	}
	return g, nil
}
