package proxy

import (
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"tau2rl/lib/inference/protocol"
)

// wireToolCalls are a message's tool calls as OpenAI returns them:
// arguments as a JSON string of the generated JSON object, as generated.
func wireToolCalls(ch *choice) []protocol.ToolCall {
	var out []protocol.ToolCall
	for _, tc := range ch.message.ToolCalls {
		out = append(out, protocol.NewToolCall(tc.ID, tc.Function.Name, string(tc.Function.Arguments)))
	}
	return out
}

// systemFingerprint names the proxy in every chat.completion and chunk.
const systemFingerprint = "tau2rl-proxy"

// completionBody is a non-streaming chat.completion object.
func completionBody(id, model string, created int64, choices []*choice, u protocol.Usage) protocol.ChatResponse {
	out := make([]protocol.ChatChoice, len(choices))
	for i, ch := range choices {
		out[i] = protocol.ChatChoice{Index: i, FinishReason: ch.finish,
			Message: protocol.AssistantMessage(ch.message.Content, ch.reasoning, wireToolCalls(ch))}
	}
	return protocol.ChatResponse{ID: id, Object: "chat.completion", Created: created, Model: model,
		SystemFingerprint: systemFingerprint, Choices: out, Usage: u}
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
func writeStream(w http.ResponseWriter, id, model string, created int64, choices []*choice, u protocol.Usage, includeUsage bool) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	chunk := func(choices []protocol.ChatChunkChoice, withUsage bool) error {
		c := protocol.ChatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
			SystemFingerprint: systemFingerprint, Choices: choices}
		if includeUsage {
			if withUsage {
				c.SetUsage(&u)
			} else {
				c.SetUsage(nil)
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
	delta := func(i int, d protocol.ChatDelta, finish *string) []protocol.ChatChunkChoice {
		return []protocol.ChatChunkChoice{{Index: i, Delta: d, FinishReason: finish}}
	}
	for i, ch := range choices {
		first := protocol.ChatDelta{Role: "assistant", Content: protocol.JSONString(""), Refusal: protocol.JSONNull}
		if len(ch.message.ToolCalls) > 0 && ch.message.Content == "" {
			first.Content = protocol.JSONNull
		}
		if err := chunk(delta(i, first, nil), false); err != nil {
			return nil // the client went away; the call is recorded
		}
		if ch.reasoning != nil {
			// One delta: reasoning_content is not OpenAI's field, and the
			// openai SDK's stream accumulator keeps the last value of a
			// field it does not know instead of concatenating.
			if err := chunk(delta(i, protocol.ChatDelta{ReasoningContent: ch.reasoning}, nil), false); err != nil {
				return nil
			}
		}
		for _, p := range pieces(ch.message.Content) {
			if err := chunk(delta(i, protocol.ChatDelta{Content: protocol.JSONString(p)}, nil), false); err != nil {
				return nil
			}
		}
		for k, tc := range ch.message.ToolCalls {
			head := protocol.NewToolCall(tc.ID, tc.Function.Name, "")
			head.Index = &k
			if err := chunk(delta(i, protocol.ChatDelta{ToolCalls: []protocol.ToolCall{head}}, nil), false); err != nil {
				return nil
			}
			for _, p := range pieces(string(tc.Function.Arguments)) {
				d := protocol.ChatDelta{ToolCalls: []protocol.ToolCall{{Index: &k, Function: protocol.ToolCallFunction{Arguments: p}}}}
				if err := chunk(delta(i, d, nil), false); err != nil {
					return nil
				}
			}
		}
		finish := ch.finish
		if err := chunk(delta(i, protocol.ChatDelta{}, &finish), false); err != nil {
			return nil
		}
	}
	if includeUsage {
		if err := chunk([]protocol.ChatChunkChoice{}, true); err != nil {
			return nil
		}
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	if flusher != nil {
		flusher.Flush()
	}
	return nil
}
