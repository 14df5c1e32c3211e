package protocol

import (
	"encoding/json"
	"fmt"
)

// OpenAI chat completions (docs/INFERENCE.md §5), as vLLM and SGLang serve them and as the
// capture proxy answers agents.

// ChatRequestOf is OpenAI's chat-completions request: the fields any server of the project
// reads, plus the vLLM/SGLang extensions (top_k, min_p, stop_token_ids, return_token_ids, rid,
// chat_template_kwargs). Other fields are accepted and ignored, as vLLM and SGLang do. M is the
// message type, since the servers differ in one respect: the capture proxy is an OpenAI API
// and reads ChatMessage (tool-call arguments a JSON string, as OpenAI requires), while the
// Qwen3-template servers (tau2-sampler, llmtest) take chattemplate.WireMessage, whose arguments
// may also be an object, as SGLang's protocol.py allows.
type ChatRequestOf[M any] struct {
	Model               string            `json:"model,omitempty"`
	Messages            []M               `json:"messages"`
	Tools               []json.RawMessage `json:"tools,omitempty"`
	ToolChoice          json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls,omitempty"`
	Stream              bool              `json:"stream,omitempty"`
	StreamOptions       *StreamOptions    `json:"stream_options,omitempty"`
	N                   *int              `json:"n,omitempty"`
	Stop                json.RawMessage   `json:"stop,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	TopP                *float64          `json:"top_p,omitempty"`
	TopK                *int              `json:"top_k,omitempty"`
	MinP                *float64          `json:"min_p,omitempty"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Seed                *int64            `json:"seed,omitempty"`
	Logprobs            *bool             `json:"logprobs,omitempty"`
	TopLogprobs         *int              `json:"top_logprobs,omitempty"`
	StopTokenIDs        []int64           `json:"stop_token_ids,omitempty"`
	ReturnTokenIDs      *bool             `json:"return_token_ids,omitempty"`
	Rid                 string            `json:"rid,omitempty"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs,omitempty"`
	// Functions and FunctionCall are OpenAI's deprecated forms of tools and tool_choice; the
	// proxy refuses them rather than ignore them (the model would never see the functions).
	Functions    json.RawMessage `json:"functions,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
}

// ChatRequest is the OpenAI form of the request, with ChatMessage messages.
type ChatRequest = ChatRequestOf[ChatMessage]

// WantLogprobs reports logprobs: true.
func (r *ChatRequestOf[M]) WantLogprobs() bool { return r.Logprobs != nil && *r.Logprobs }

// MaxCompletion is the completion bound and the field that set it: max_completion_tokens
// (OpenAI's current name) before max_tokens; nil when neither is set.
func (r *ChatRequestOf[M]) MaxCompletion() (*int, string) {
	if r.MaxCompletionTokens != nil {
		return r.MaxCompletionTokens, "max_completion_tokens"
	}
	return r.MaxTokens, "max_tokens"
}

// EnableThinking reads chat_template_kwargs.enable_thinking (nil: the template's default).
func (r *ChatRequestOf[M]) EnableThinking() (*bool, error) {
	v, ok := r.ChatTemplateKwargs["enable_thinking"]
	if !ok || v == nil {
		return nil, nil
	}
	b, ok := v.(bool)
	if !ok {
		return nil, fmt.Errorf("chat_template_kwargs.enable_thinking must be true or false, got %v", v)
	}
	return &b, nil
}

// ToolChoiceAutoOrNone reads tool_choice as the Qwen3-template servers take it: absent, null, "auto" or
// "none" (they do not constrain sampling, so "required" and a named function are refused).
// It returns whether tool calls are parsed out of the completion.
func ToolChoiceAutoOrNone(raw json.RawMessage, haveTools bool) (parse bool, err error) {
	if IsNull(raw) {
		return haveTools, nil
	}
	var choice string
	if json.Unmarshal(raw, &choice) != nil || (choice != "auto" && choice != "none") {
		return false, fmt.Errorf(`tool_choice: only "auto" and "none" are supported`)
	}
	return haveTools && choice == "auto", nil
}

// StreamOptions is OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one OpenAI message as a client sends it. Content is a string, null, or an array
// of content parts (chattemplate.JoinContentText reads it).
type ChatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	Name             string          `json:"name,omitempty"`
	// FunctionCall is the deprecated form of an assistant's tool_calls.
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
}

// ToolCall is a tool call as OpenAI sends and returns it: arguments a JSON string holding the
// JSON object. Index is set in streamed deltas (and by SGLang in messages).
type ToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function ToolCallFunction `json:"function"`
}

// ToolCallFunction is a tool call's function: its name and its arguments as a JSON string.
type ToolCallFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// NewToolCall is a complete tool call of a response message (type "function").
func NewToolCall(id, name, arguments string) ToolCall {
	return ToolCall{ID: id, Type: "function", Function: ToolCallFunction{Name: name, Arguments: arguments}}
}

// ChatResponse is a non-streaming chat.completion. PromptTokenIDs (return_token_ids) is a
// top-level field as in vLLM; SGLExt is SGLang's extension with the weight version(s) that
// sampled the completion.
type ChatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []ChatChoice `json:"choices"`
	Usage             Usage        `json:"usage"`
	PromptTokenIDs    []int32      `json:"prompt_token_ids,omitempty"`
	SGLExt            *SGLExt      `json:"sglext,omitempty"`
}

// SGLExt is SGLang's sglext object of a chat response.
type SGLExt struct {
	WeightVersion  string        `json:"weight_version"`
	WeightVersions []VersionSpan `json:"weight_versions"`
	CachedTokens   int           `json:"cached_tokens"`
}

// ChatChoice is one choice of a chat.completion. MatchedStop is SGLang's (the stop token id
// or string, omitted when none); TokenIDs the output ids with return_token_ids.
type ChatChoice struct {
	Index        int                 `json:"index"`
	Message      ChatResponseMessage `json:"message"`
	Logprobs     *ChatLogprobs       `json:"logprobs"`
	FinishReason string              `json:"finish_reason"`
	MatchedStop  any                 `json:"matched_stop,omitempty"`
	TokenIDs     []int32             `json:"token_ids,omitempty"`
}

// ChatResponseMessage is the assistant message of a choice: content null when there are only
// tool calls, refusal always null (OpenAI's field; no server of the project refuses), and
// reasoning_content (SGLang's and DeepSeek's name) only when the completion had thinking.
type ChatResponseMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	Refusal          *string    `json:"refusal"`
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// AssistantMessage is the response message for content, reasoning (nil: none) and tool calls;
// content is null when it is empty and there are tool calls.
func AssistantMessage(content string, reasoning *string, calls []ToolCall) ChatResponseMessage {
	m := ChatResponseMessage{Role: "assistant", Content: &content, ReasoningContent: reasoning, ToolCalls: calls}
	if content == "" && len(calls) > 0 {
		m.Content = nil
	}
	return m
}

// ChatLogprobs is a choice's logprobs: one entry per completion token.
type ChatLogprobs struct {
	Content []ChatTokenLogprob `json:"content"`
}

// ChatTokenLogprob is one token's log-prob: its text, its bytes (the token's own bytes, which
// may be part of a UTF-8 sequence), the log-prob (ClampLogprob) and the top alternatives.
type ChatTokenLogprob struct {
	Token       string           `json:"token"`
	Bytes       []int            `json:"bytes"`
	Logprob     float64          `json:"logprob"`
	TopLogprobs []ChatTopLogprob `json:"top_logprobs"`
}

// ChatTopLogprob is one alternative of a token.
type ChatTopLogprob struct {
	Token   string  `json:"token"`
	Bytes   []int   `json:"bytes"`
	Logprob float64 `json:"logprob"`
}

// NewChatTopLogprob is an entry for a token whose text is token (the tokenizer's lossy decoding
// of raw, as the servers' detokenizers produce) and whose bytes are raw, log-prob clamped.
func NewChatTopLogprob(token string, raw []byte, logprob float64) ChatTopLogprob {
	b := make([]int, len(raw))
	for i, c := range raw {
		b[i] = int(c)
	}
	return ChatTopLogprob{Token: token, Bytes: b, Logprob: ClampLogprob(logprob)}
}

// ChatChunk is one chat.completion.chunk of a streamed answer. Usage is omitted, or null on
// every chunk but the last when the client asked stream_options.include_usage (SetUsage).
type ChatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	SystemFingerprint string            `json:"system_fingerprint,omitempty"`
	Choices           []ChatChunkChoice `json:"choices"`
	Usage             json.RawMessage   `json:"usage,omitempty"`
}

// SetUsage makes the chunk carry usage: u, or null when u is nil.
func (c *ChatChunk) SetUsage(u *Usage) {
	if u == nil {
		c.Usage = json.RawMessage("null")
		return
	}
	c.Usage, _ = json.Marshal(u) // a Usage always encodes
}

// ChatChunkChoice is a choice's delta; FinishReason is null until its last chunk.
type ChatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        ChatDelta     `json:"delta"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// ChatDelta is the change a chunk carries: the role (first chunk), content or reasoning
// pieces, tool-call pieces (with Index; ID, type and name in a call's first piece). Content and
// Refusal are raw so that the first chunk can carry an explicit null (JSONNull).
type ChatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          json.RawMessage `json:"content,omitempty"`
	Refusal          json.RawMessage `json:"refusal,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall      `json:"tool_calls,omitempty"`
}

// JSONNull is an explicit JSON null for a raw field.
var JSONNull = json.RawMessage("null")

// JSONString is s as a raw JSON string.
func JSONString(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}
