package proxy

import (
	"encoding/json"
	"net/http"
	"unicode/utf8"
)

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// wireToolCalls are a message's tool calls as OpenAI returns them:
// arguments as a JSON string of the generated JSON object, as generated.
func wireToolCalls(ch *choice) []map[string]any {
	var out []map[string]any
	for _, tc := range ch.message.ToolCalls {
		out = append(out, map[string]any{"id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Function.Name, "arguments": string(tc.Function.Arguments)}})
	}
	return out
}

// completionBody is a non-streaming chat.completion object.
func completionBody(id, model string, created int64, choices []*choice, u usage) map[string]any {
	out := make([]any, len(choices))
	for i, ch := range choices {
		msg := map[string]any{"role": "assistant", "content": ch.message.Content, "refusal": nil}
		if tcs := wireToolCalls(ch); len(tcs) > 0 {
			msg["tool_calls"] = tcs
			if ch.message.Content == "" {
				msg["content"] = nil
			}
		}
		if ch.reasoning != nil {
			msg["reasoning_content"] = *ch.reasoning
		}
		out[i] = map[string]any{"index": i, "message": msg, "logprobs": nil, "finish_reason": ch.finish}
	}
	return map[string]any{"id": id, "object": "chat.completion", "created": created, "model": model,
		"system_fingerprint": "tau2rl-proxy", "choices": out, "usage": u}
}

// streamPiece is how many bytes of text one content or arguments delta
// carries (cut on rune boundaries): streamed answers arrive in several
// deltas, as from OpenAI, so clients' accumulation code is exercised.
const streamPiece = 16

func pieces(s string) []string {
	var out []string
	for len(s) > 0 {
		n := min(streamPiece, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// writeStream answers as server-sent events with OpenAI's
// chat.completion.chunk shapes: per choice a first delta with the role,
// one reasoning_content delta (vLLM's and DeepSeek's field), content deltas,
// for each tool call a delta with index, id, type, name and empty
// arguments followed by arguments deltas, and a last delta with the
// finish_reason; then, with stream_options.include_usage, a chunk with
// empty choices and the usage (every other chunk has "usage": null); then
// "data: [DONE]". The completion is generated before the first event (the
// policy servers are called in token mode, non-streaming).
func writeStream(w http.ResponseWriter, id, model string, created int64, choices []*choice, u usage, includeUsage bool) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	chunk := func(choices []any, withUsage bool) error {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"system_fingerprint": "tau2rl-proxy", "choices": choices}
		if includeUsage {
			c["usage"] = nil
			if withUsage {
				c["usage"] = u
			}
		}
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	delta := func(i int, d map[string]any, finish any) []any {
		return []any{map[string]any{"index": i, "delta": d, "logprobs": nil, "finish_reason": finish}}
	}
	for i, ch := range choices {
		first := map[string]any{"role": "assistant", "content": "", "refusal": nil}
		if len(ch.message.ToolCalls) > 0 && ch.message.Content == "" {
			first["content"] = nil
		}
		if err := chunk(delta(i, first, nil), false); err != nil {
			return nil // the client went away; the call is recorded
		}
		if ch.reasoning != nil {
			// One delta: reasoning_content is not OpenAI's field, and the
			// openai SDK's stream accumulator keeps the last value of a
			// field it does not know instead of concatenating.
			if err := chunk(delta(i, map[string]any{"reasoning_content": *ch.reasoning}, nil), false); err != nil {
				return nil
			}
		}
		for _, p := range pieces(ch.message.Content) {
			if err := chunk(delta(i, map[string]any{"content": p}, nil), false); err != nil {
				return nil
			}
		}
		for k, tc := range ch.message.ToolCalls {
			head := map[string]any{"index": k, "id": tc.ID, "type": "function",
				"function": map[string]any{"name": tc.Function.Name, "arguments": ""}}
			if err := chunk(delta(i, map[string]any{"tool_calls": []any{head}}, nil), false); err != nil {
				return nil
			}
			for _, p := range pieces(string(tc.Function.Arguments)) {
				d := map[string]any{"tool_calls": []any{map[string]any{"index": k, "function": map[string]any{"arguments": p}}}}
				if err := chunk(delta(i, d, nil), false); err != nil {
					return nil
				}
			}
		}
		if err := chunk(delta(i, map[string]any{}, ch.finish), false); err != nil {
			return nil
		}
	}
	if includeUsage {
		if err := chunk([]any{}, true); err != nil {
			return nil
		}
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	if flusher != nil {
		flusher.Flush()
	}
	return nil
}
