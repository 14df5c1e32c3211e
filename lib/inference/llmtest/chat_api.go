package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/tokenizer"
)

// chatRequest is the part of an OpenAI chat request the server reads.
type chatRequest struct {
	Model               string                     `json:"model"`
	Messages            []chattemplate.WireMessage `json:"messages"`
	Tools               []json.RawMessage          `json:"tools"`
	MaxTokens           *int                       `json:"max_tokens"`
	MaxCompletionTokens *int                       `json:"max_completion_tokens"`
	Temperature         *float64                   `json:"temperature"`
	Logprobs            bool                       `json:"logprobs"`
	TopLogprobs         *int                       `json:"top_logprobs"`
	Stream              bool                       `json:"stream"`
	N                   *int                       `json:"n"`
	StopTokenIDs        []int32                    `json:"stop_token_ids"`
	ReturnTokenIDs      *bool                      `json:"return_token_ids"`
	ChatTemplateKwargs  struct {
		EnableThinking *bool `json:"enable_thinking"`
	} `json:"chat_template_kwargs"`
}

// chat serves POST /v1/chat/completions with tools, tool calls and
// log-probs, in vLLM/SGLang's shape (reasoning_content, optional token_ids).
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "decode request: "+err.Error())
		return
	}
	if req.Stream || (req.N != nil && *req.N != 1) {
		writeError(w, http.StatusBadRequest, "stream and n > 1 are not supported by the scripted server")
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "messages must not be empty")
		return
	}
	if req.Tools != nil && len(req.Tools) == 0 {
		writeError(w, http.StatusBadRequest, "tools must not be an empty list")
		return
	}
	msgs, err := chattemplate.FromWire(req.Messages)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	opts := chattemplate.Options{Tools: req.Tools, AddGenerationPrompt: true, EnableThinking: req.ChatTemplateKwargs.EnableThinking}
	prompt, err := chattemplate.Render(msgs, opts)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ids := s.tok.Encode(prompt)
	call := &Call{API: APIChat, Model: req.Model, Messages: msgs, Tools: req.Tools, PromptIDs: ids, PromptText: prompt,
		Temperature: req.Temperature, Header: r.Header, Body: body,
		ThinkingOff: req.ChatTemplateKwargs.EnableThinking != nil && !*req.ChatTemplateKwargs.EnableThinking}
	if req.MaxCompletionTokens != nil {
		call.MaxTokens = *req.MaxCompletionTokens
	} else if req.MaxTokens != nil {
		call.MaxTokens = *req.MaxTokens
	}
	g, err := s.complete(r.Context(), call, req.StopTokenIDs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	msgIDs := g.ids
	if g.finish == "stop" {
		msgIDs = g.ids[:len(g.ids)-1] // the stop token is not part of the message
	}
	text, _ := s.tok.Decode(msgIDs)
	parsed := chattemplate.ParseCompletion(text)
	msg := map[string]any{"role": "assistant", "content": parsed.Content, "reasoning_content": nil}
	if parsed.HasThinking {
		msg["reasoning_content"] = parsed.Reasoning
	}
	finish := g.finish
	if len(parsed.ToolCalls) > 0 {
		calls := make([]any, len(parsed.ToolCalls))
		for i, tc := range parsed.ToolCalls {
			args, err := chattemplate.ToJSON(tc.Function.Arguments)
			if err != nil {
				args = string(tc.Function.Arguments)
			}
			calls[i] = map[string]any{"id": fmt.Sprintf("call_%d_%d", call.Seq, i), "type": "function", "index": i,
				"function": map[string]any{"name": tc.Function.Name, "arguments": args}}
		}
		msg["tool_calls"] = calls
		if finish == "stop" {
			finish = "tool_calls"
		}
	}
	if !parsed.Valid() && parsed.Content == "" && len(parsed.ToolCalls) == 0 {
		msg["content"] = text // unparseable output reaches the client as text, as servers pass it through
	}
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}
	if req.Logprobs {
		top := 0
		if req.TopLogprobs != nil {
			top = *req.TopLogprobs
		}
		choice["logprobs"] = map[string]any{"content": chatLogprobs(s.tok, msgIDs, g.logp, top)}
	}
	resp := map[string]any{
		"id": fmt.Sprintf("chatcmpl-llmtest-%d", call.Seq), "object": "chat.completion", "created": time.Now().Unix(),
		"model": firstNonEmpty(req.Model, s.model), "choices": []any{choice},
		"usage": map[string]any{"prompt_tokens": len(ids), "completion_tokens": len(g.ids), "total_tokens": len(ids) + len(g.ids)},
	}
	if req.ReturnTokenIDs != nil && *req.ReturnTokenIDs {
		choice["token_ids"] = g.ids
		resp["prompt_token_ids"] = ids
	}
	writeJSON(w, http.StatusOK, resp)
}

// chatLogprobs builds OpenAI logprobs content entries; the top list holds
// the sampled token and top-1 made-up alternatives with lower log-probs.
func chatLogprobs(tok *tokenizer.Tokenizer, ids []int32, logp []float32, top int) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		entry := func(id int32, lp float32) map[string]any {
			b, _ := tok.TokenBytes(id)
			ints := make([]int, len(b))
			for k, c := range b {
				ints[k] = int(c)
			}
			return map[string]any{"token": tokenizer.LossyUTF8(b), "bytes": ints, "logprob": lp}
		}
		e := entry(id, logp[i])
		alts := []any{}
		for k := 0; k < top; k++ {
			if k == 0 {
				alts = append(alts, entry(id, logp[i]))
				continue
			}
			alt := (id + int32(k)) % int32(tok.VocabSize())
			alts = append(alts, entry(alt, logp[i]-float32(k)))
		}
		e["top_logprobs"] = alts
		out[i] = e
	}
	return out
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
