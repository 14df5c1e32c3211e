package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"tau2rl/gpu/sampler"
	"tau2rl/lib/inference/chattemplate"
)

// completionRequest is vLLM's CompletionRequest, the single token-prompt subset.
type completionRequest struct {
	Model                  string          `json:"model"`
	Prompt                 json.RawMessage `json:"prompt"`
	MaxTokens              *int            `json:"max_tokens"`
	Temperature            *float64        `json:"temperature"`
	TopP                   *float64        `json:"top_p"`
	TopK                   *int            `json:"top_k"`
	MinP                   *float64        `json:"min_p"`
	Stop                   json.RawMessage `json:"stop"`
	StopTokenIDs           []int64         `json:"stop_token_ids"`
	IgnoreEOS              bool            `json:"ignore_eos"`
	Seed                   *int64          `json:"seed"`
	Logprobs               *int            `json:"logprobs"`
	Echo                   bool            `json:"echo"`
	N                      *int            `json:"n"`
	Stream                 bool            `json:"stream"`
	ReturnTokenIDs         *bool           `json:"return_token_ids"`
	ReturnTokensAsTokenIDs *bool           `json:"return_tokens_as_token_ids"`
	SkipSpecialTokens      *bool           `json:"skip_special_tokens"`
	IncludeStopStrInOutput bool            `json:"include_stop_str_in_output"`
	RequestID              string          `json:"request_id"`
}

// completions is vLLM's POST /v1/completions with a token-id prompt. logprobs: 0 returns the
// sampled tokens' log-probs; top alternatives (logprobs > 0) are not computed by this server.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	if msg := oneChoiceNoStream(req.Stream, req.N, "n"); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	switch {
	case req.Echo:
		writeError(w, http.StatusBadRequest, "echo is not supported")
		return
	case req.Logprobs != nil && *req.Logprobs != 0:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("logprobs=%d: only 0 (the sampled token's log-prob) is supported", *req.Logprobs))
		return
	}
	if t := bytes.TrimSpace(req.Prompt); len(t) > 0 && t[0] == '"' {
		writeError(w, http.StatusBadRequest, "text prompts are not supported; send prompt as a list of token ids")
		return
	}
	ids, err := parseIDs("prompt", req.Prompt)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	params, stops, sids, err := samplingOptions("", req.Temperature, req.TopP, req.TopK, req.MinP, req.Stop, req.StopTokenIDs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rid := requestID(req.RequestID)
	res, ok := s.submit(w, r, sampler.Request{
		ID: rid, Prompt: ids, Params: params, MaxNewTokens: s.maxNew(req.MaxTokens, 16, len(ids)), MaxNewTokensField: "max_tokens",
		StopTokenIDs: sids, IgnoreEOS: req.IgnoreEOS, StopStrings: stops, Seed: seedOf(req.Seed),
	})
	if !ok {
		return
	}
	skip := req.SkipSpecialTokens == nil || *req.SkipSpecialTokens
	text, _ := s.text(res, skip, !req.IncludeStopStrInOutput)
	choice := map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": res.Finish.Type,
		"stop_reason": vllmStopReason(res.Finish, sids), "prompt_logprobs": nil}
	if req.Logprobs != nil {
		asIDs := req.ReturnTokensAsTokenIDs != nil && *req.ReturnTokensAsTokenIDs
		choice["logprobs"] = s.vllmLogprobs(res, asIDs)
	}
	if req.ReturnTokenIDs != nil && *req.ReturnTokenIDs {
		choice["token_ids"] = res.OutputIDs
		choice["prompt_token_ids"] = ids
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "cmpl-" + rid, "object": "text_completion", "created": time.Now().Unix(), "model": s.opts.ModelName,
		"choices": []any{choice},
		"usage": map[string]any{"prompt_tokens": res.PromptTokens, "completion_tokens": len(res.OutputIDs),
			"total_tokens": res.PromptTokens + len(res.OutputIDs), "prompt_tokens_details": map[string]int{"cached_tokens": res.CachedTokens}},
		"weight_version": res.Version, "weight_versions": spans(res.Versions),
	})
}

// vllmStopReason is the stop string or stop token id that ended the choice; null for EOS and length.
func vllmStopReason(f sampler.FinishReason, stopIDs []int32) any {
	switch {
	case f.Type != sampler.FinishStop:
		return nil
	case f.MatchedString != "":
		return f.MatchedString
	}
	for _, id := range stopIDs {
		if id == f.MatchedToken {
			return id
		}
	}
	return nil
}

func (s *Server) tokenString(id int32, asIDs bool) string {
	if tok := s.eng.Tokenizer(); tok != nil && !asIDs {
		if b, ok := tok.TokenBytes(id); ok {
			return string(b)
		}
	}
	return "token_id:" + strconv.Itoa(int(id))
}

func (s *Server) vllmLogprobs(res sampler.Result, asIDs bool) map[string]any {
	n := len(res.OutputIDs)
	tokens := make([]string, n)
	lps := make([]float64, n)
	top := make([]map[string]float64, n)
	offs := make([]int, n)
	off := 0
	for i, id := range res.OutputIDs {
		tokens[i] = s.tokenString(id, asIDs)
		lps[i] = max(float64(res.LogProbs[i]), -9999)
		top[i] = map[string]float64{tokens[i]: lps[i]}
		offs[i] = off
		off += len(tokens[i])
	}
	return map[string]any{"text_offset": offs, "token_logprobs": lps, "tokens": tokens, "top_logprobs": top}
}

// chatRequest is the OpenAI chat request subset the server reads.
type chatRequest struct {
	Model               string                     `json:"model"`
	Messages            []chattemplate.WireMessage `json:"messages"`
	Tools               []json.RawMessage          `json:"tools"`
	ToolChoice          json.RawMessage            `json:"tool_choice"`
	MaxTokens           *int                       `json:"max_tokens"`
	MaxCompletionTokens *int                       `json:"max_completion_tokens"`
	Temperature         *float64                   `json:"temperature"`
	TopP                *float64                   `json:"top_p"`
	TopK                *int                       `json:"top_k"`
	MinP                *float64                   `json:"min_p"`
	Stop                json.RawMessage            `json:"stop"`
	StopTokenIDs        []int64                    `json:"stop_token_ids"`
	Seed                *int64                     `json:"seed"`
	Logprobs            bool                       `json:"logprobs"`
	TopLogprobs         *int                       `json:"top_logprobs"`
	N                   *int                       `json:"n"`
	Stream              bool                       `json:"stream"`
	ReturnTokenIDs      *bool                      `json:"return_token_ids"`
	Rid                 string                     `json:"rid"`
	ChatTemplateKwargs  struct {
		EnableThinking *bool `json:"enable_thinking"`
	} `json:"chat_template_kwargs"`
}

// chat is OpenAI's POST /v1/chat/completions: the messages and tools are rendered with Qwen3's
// chat template, generation stops at <|im_end|> or <|endoftext|>, and the completion is parsed
// as SGLang's qwen3 reasoning parser and qwen25 tool-call parser read it (thinking into
// reasoning_content, <tool_call> blocks into tool_calls). A completion that does not parse is
// returned whole as content, without tool calls.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	tok := s.eng.Tokenizer()
	if tok == nil {
		writeError(w, http.StatusBadRequest, "chat completions need a tokenizer; the server was started without one")
		return
	}
	var req chatRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	if msg := oneChoiceNoStream(req.Stream, req.N, "n"); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	switch {
	case req.TopLogprobs != nil && *req.TopLogprobs > 0:
		writeError(w, http.StatusBadRequest, "top_logprobs > 0 is not supported")
		return
	case len(req.Messages) == 0:
		writeError(w, http.StatusBadRequest, "messages must not be empty")
		return
	case req.Tools != nil && len(req.Tools) == 0:
		writeError(w, http.StatusBadRequest, "tools must not be an empty list")
		return
	}
	parseTools := len(req.Tools) > 0
	if tc := bytes.TrimSpace(req.ToolChoice); len(tc) > 0 && string(tc) != "null" {
		var choice string
		if json.Unmarshal(tc, &choice) != nil || (choice != "auto" && choice != "none") {
			writeError(w, http.StatusBadRequest, `tool_choice: only "auto" and "none" are supported`)
			return
		}
		parseTools = parseTools && choice == "auto"
	}
	msgs, err := chattemplate.FromWire(req.Messages)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	for i, t := range req.Tools {
		if !json.Valid(t) || bytes.TrimSpace(t)[0] != '{' {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("tools[%d] is not a JSON object", i))
			return
		}
	}
	prompt, err := chattemplate.Render(msgs, chattemplate.Options{Tools: req.Tools, AddGenerationPrompt: true, EnableThinking: req.ChatTemplateKwargs.EnableThinking})
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ids := tok.Encode(prompt)
	params, stops, sids, err := samplingOptions("", req.Temperature, req.TopP, req.TopK, req.MinP, req.Stop, req.StopTokenIDs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	for _, special := range []string{chattemplate.IMEnd, "<|endoftext|>"} {
		if id, ok := tok.AddedTokenID(special); ok {
			sids = append(sids, id)
		}
	}
	maxTok, field := req.MaxCompletionTokens, "max_completion_tokens"
	if maxTok == nil {
		maxTok, field = req.MaxTokens, "max_tokens"
	}
	rid := requestID(req.Rid)
	res, ok := s.submit(w, r, sampler.Request{
		ID: rid, Prompt: ids, Params: params, MaxNewTokens: s.maxNew(maxTok, 0, len(ids)), MaxNewTokensField: field,
		StopTokenIDs: sids, StopStrings: stops, Seed: seedOf(req.Seed),
	})
	if !ok {
		return
	}
	text, _ := s.text(res, false, true)
	msg, finish := chatMessage(text, parseTools, rid, res.Finish.Type)
	choice := map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish,
		"matched_stop": matchedStop(res.Finish)}
	if req.Logprobs {
		content := make([]map[string]any, len(res.OutputIDs))
		for i, id := range res.OutputIDs {
			b, _ := tok.TokenBytes(id)
			ints := make([]int, len(b))
			for j, x := range b {
				ints[j] = int(x)
			}
			content[i] = map[string]any{"token": string(b), "bytes": ints, "logprob": float64(res.LogProbs[i]), "top_logprobs": []any{}}
		}
		choice["logprobs"] = map[string]any{"content": content}
	}
	out := map[string]any{
		"id": "chatcmpl-" + rid, "object": "chat.completion", "created": time.Now().Unix(), "model": s.opts.ModelName,
		"choices": []any{choice},
		"usage":   map[string]any{"prompt_tokens": res.PromptTokens, "completion_tokens": len(res.OutputIDs), "total_tokens": res.PromptTokens + len(res.OutputIDs)},
		"sglext":  map[string]any{"weight_version": res.Version, "weight_versions": spans(res.Versions), "cached_tokens": res.CachedTokens},
	}
	if req.ReturnTokenIDs != nil && *req.ReturnTokenIDs {
		choice["token_ids"] = res.OutputIDs
		out["prompt_token_ids"] = ids
	}
	writeJSON(w, http.StatusOK, out)
}

func matchedStop(f sampler.FinishReason) any {
	switch {
	case f.Type != sampler.FinishStop:
		return nil
	case f.MatchedString != "":
		return f.MatchedString
	}
	return f.MatchedToken
}

// chatMessage turns a completion's text into OpenAI's assistant message and finish reason:
// thinking into reasoning_content, <tool_call> blocks into tool_calls (finish "tool_calls") when
// parseTools. A completion that does not parse is returned whole as content, without tool calls.
func chatMessage(text string, parseTools bool, rid, finish string) (map[string]any, string) {
	msg := map[string]any{"role": "assistant", "content": text, "reasoning_content": nil}
	if !parseTools && !strings.Contains(text, chattemplate.ThinkClose) {
		return msg, finish
	}
	c := chattemplate.ParseCompletion(text)
	if !c.Valid() {
		return msg, finish
	}
	msg["content"] = c.Content
	if c.HasThinking {
		msg["reasoning_content"] = c.Reasoning
	}
	if parseTools && len(c.ToolCalls) > 0 {
		calls := make([]map[string]any, len(c.ToolCalls))
		for i, tc := range c.ToolCalls {
			calls[i] = map[string]any{"id": fmt.Sprintf("call_%s_%d", rid, i), "type": "function", "index": i,
				"function": map[string]any{"name": tc.Function.Name, "arguments": string(tc.Function.Arguments)}}
		}
		msg["tool_calls"] = calls
		if c.Content == "" {
			msg["content"] = nil
		}
		if finish == sampler.FinishStop {
			finish = "tool_calls"
		}
	}
	return msg, finish
}
