// Package llmtest is a scripted OpenAI-compatible inference server for tests
// and dev runs: a real HTTP server on loopback that speaks the wire formats
// tau2rl's clients speak — chat completions with tools and log-probs
// (/v1/chat/completions), SGLang's /generate with input_ids, vLLM's
// /v1/completions with a token-id prompt, weight reload (SGLang
// /update_weights_from_disk and vLLM's dev-mode weight-transfer sequence)
// and /health — while a Go Script decides what the "model" answers.
//
// A Script sees each call as a Call: the decoded chat messages and tools
// (token-mode prompts are decoded with the real Qwen3 tokenizer and read
// back into messages with chattemplate.ParseRendered), and returns a Reply:
// content, optional reasoning, tool calls, or raw completion text to test
// malformed output. The server renders the reply exactly as Qwen3 writes a
// turn (chattemplate's format), tokenizes it with the real tokenizer, ends
// it with <|im_end|>, and attaches deterministic pseudo log-probs (Logprob).
//
// Faults are injected per request: HTTP errors (FailNext), delays
// (DelayNext, SetLatency), dropped connections (DropNext) and malformed JSON
// (MalformNext).
//
// Example:
//
//	srv, err := llmtest.NewServer(tok, llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
//		last := c.Messages[len(c.Messages)-1]
//		if last.Role == chattemplate.RoleTool {
//			return llmtest.Reply{Content: "Done."}, nil
//		}
//		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "get_user_details", Arguments: map[string]any{"user_id": "mia_li_3668"}}}}, nil
//	}))
//	defer srv.Close()
//	// point clients at srv.URL
package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"tau2rl/lib/inference/chattemplate"
)

// API names the wire format a call came in on.
type API string

// The APIs the server speaks.
const (
	APIChat        API = "chat"        // POST /v1/chat/completions
	APIGenerate    API = "generate"    // POST /generate (SGLang)
	APICompletions API = "completions" // POST /v1/completions (vLLM)
)

// Call is one generation request as the script sees it.
type Call struct {
	// Seq numbers the server's generation calls from 1.
	Seq int
	API API
	// Model is the requested model name (chat, completions).
	Model string
	// Messages is the conversation: as sent (chat), or read back from the
	// token prompt (generate, completions; empty if the prompt is not Qwen3
	// chat markup).
	Messages []chattemplate.Message
	// Tools are the tools offered (chat: the request's tools; token modes:
	// the system turn's "# Tools" block).
	Tools []json.RawMessage
	// PromptIDs and PromptText are the prompt as tokens and text (chat: the
	// Qwen3 rendering of Messages).
	PromptIDs  []int32
	PromptText string
	// MaxTokens is the completion budget (0: unlimited).
	MaxTokens int
	// Temperature is the requested temperature, nil when the request had
	// none (so tests can see that 0 was sent).
	Temperature *float64
	// ThinkingOff is true when the prompt ends with an empty think block
	// (enable_thinking=false): the reply's Reasoning is then not rendered.
	ThinkingOff bool
	// Header holds the request's HTTP headers.
	Header http.Header
	// Body is the raw request body.
	Body []byte
}

// LastMessage returns the last message of the conversation, or a zero
// Message when there is none.
func (c *Call) LastMessage() chattemplate.Message {
	if len(c.Messages) == 0 {
		return chattemplate.Message{}
	}
	return c.Messages[len(c.Messages)-1]
}

// ToolNames lists the names of the offered tools.
func (c *Call) ToolNames() []string {
	var out []string
	for _, t := range c.Tools {
		var v struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &v) == nil && v.Function.Name != "" {
			out = append(out, v.Function.Name)
		}
	}
	return out
}

// ToolCall is a function call in a Reply. Arguments is any JSON-marshalable
// value (a map, a struct, or a json.RawMessage object).
type ToolCall struct {
	Name      string
	Arguments any
}

// Reply is what the scripted model answers.
type Reply struct {
	// Content is the visible text.
	Content string
	// Reasoning, when non-empty, is written as a <think> block before the
	// content (unless the prompt turned thinking off).
	Reasoning string
	// ToolCalls are written as <tool_call> blocks after the content.
	ToolCalls []ToolCall
	// Raw, when non-empty, is the exact completion text and replaces all of
	// the above (use it to produce malformed tool calls).
	Raw string
}

// Text is the completion text Qwen3 would generate for r (before its
// <|im_end|>): the template's assistant-turn format, so that the token ids
// round-trip through the chat template.
func (r Reply) Text(thinkingOff bool) (string, error) {
	if r.Raw != "" {
		return r.Raw, nil
	}
	var b strings.Builder
	if r.Reasoning != "" && !thinkingOff {
		b.WriteString(chattemplate.ThinkOpen + "\n" + strings.Trim(r.Reasoning, "\n") + "\n" + chattemplate.ThinkClose + "\n\n")
	}
	b.WriteString(r.Content)
	for i, tc := range r.ToolCalls {
		if i > 0 || r.Content != "" {
			b.WriteByte('\n')
		}
		args, err := argumentsJSON(tc.Arguments)
		if err != nil {
			return "", fmt.Errorf("llmtest: tool call %s: %w", tc.Name, err)
		}
		b.WriteString(chattemplate.ToolCallOpen + "\n{\"name\": \"" + tc.Name + "\", \"arguments\": " + args + "}\n" + chattemplate.ToolCallClose)
	}
	return b.String(), nil
}

func argumentsJSON(v any) (string, error) {
	if v == nil {
		return "{}", nil
	}
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		raw = b
	}
	return chattemplate.ToJSON(raw)
}

// Script decides the model's reply to each call. It is called concurrently
// for concurrent requests. An error answers the request with HTTP 500.
type Script interface {
	Reply(ctx context.Context, call *Call) (Reply, error)
}

// ScriptFunc adapts a function to Script.
type ScriptFunc func(ctx context.Context, call *Call) (Reply, error)

// Reply implements Script.
func (f ScriptFunc) Reply(ctx context.Context, call *Call) (Reply, error) { return f(ctx, call) }

// Sequence replies with replies in order, one per call, and fails once they
// are used up.
func Sequence(replies ...Reply) Script {
	var mu sync.Mutex
	next := 0
	return ScriptFunc(func(context.Context, *Call) (Reply, error) {
		mu.Lock()
		defer mu.Unlock()
		if next >= len(replies) {
			return Reply{}, fmt.Errorf("llmtest: script exhausted after %d replies", len(replies))
		}
		next++
		return replies[next-1], nil
	})
}

// Constant answers every call with the same reply.
func Constant(r Reply) Script {
	return ScriptFunc(func(context.Context, *Call) (Reply, error) { return r, nil })
}
