package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"tau2rl/gpu/sampler"
	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer"
)

// completions is vLLM's POST /v1/completions with a token-id prompt. logprobs: 0 returns the
// sampled tokens' log-probs; top alternatives (logprobs > 0) are not computed by this server.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	req, err := protocol.DecodeCompletionRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
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
	if protocol.IsString(req.Prompt) {
		writeError(w, http.StatusBadRequest, "text prompts are not supported; send prompt as a list of token ids")
		return
	}
	ids, err := protocol.TokenIDs("prompt", req.Prompt)
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
		ID: rid, Prompt: ids, Params: params, MaxNewTokens: s.maxNew(req.MaxTokens, protocol.VLLMDefaultMaxTokens, len(ids)), MaxNewTokensField: "max_tokens",
		StopTokenIDs: sids, IgnoreEOS: req.IgnoreEOS, StopStrings: stops, Seed: seedOf(req.Seed),
	})
	if !ok {
		return
	}
	skip := req.SkipSpecialTokens == nil || *req.SkipSpecialTokens
	text, _ := s.text(res, skip, !req.IncludeStopStrInOutput)
	finish := res.Finish.Type
	choice := protocol.CompletionChoice{Text: text, FinishReason: &finish, StopReason: vllmStopReason(res.Finish, sids)}
	if req.Logprobs != nil {
		asIDs := req.ReturnTokensAsTokenIDs != nil && *req.ReturnTokensAsTokenIDs
		tokens := make([]string, len(res.OutputIDs))
		for i, id := range res.OutputIDs {
			tokens[i] = s.tokenString(id, asIDs)
		}
		choice.Logprobs = protocol.NewCompletionLogprobs(tokens, logprobs(res))
	}
	if req.ReturnTokenIDs != nil && *req.ReturnTokenIDs {
		choice.TokenIDs, choice.PromptTokenIDs = outputIDs(res), ids
	}
	usage := protocol.NewUsage(res.PromptTokens, len(res.OutputIDs))
	usage.PromptTokensDetails = &protocol.PromptTokensDetails{CachedTokens: res.CachedTokens}
	writeJSON(w, http.StatusOK, protocol.CompletionResponse{
		ID: "cmpl-" + rid, Object: "text_completion", Created: time.Now().Unix(), Model: s.opts.ModelName,
		Choices: []protocol.CompletionChoice{choice}, Usage: usage,
		WeightVersion: res.Version, WeightVersions: spans(res.Versions),
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

// tokenString is a token as vLLM reports it in logprobs: its text as the tokenizer decodes it
// alone (lossy UTF-8, as Hugging Face's decode), or "token_id:N" with return_tokens_as_token_ids
// or without a tokenizer.
func (s *Server) tokenString(id int32, asIDs bool) string {
	if tok := s.eng.Tokenizer(); tok != nil && !asIDs {
		if b, ok := tok.TokenBytes(id); ok {
			return tokenizer.LossyUTF8(b)
		}
	}
	return protocol.TokenIDString(id)
}

// chatRequest is the OpenAI chat request as the Qwen3-template servers read it: tool-call
// arguments may be a JSON string or an object (SGLang's rule).
type chatRequest = protocol.ChatRequestOf[chattemplate.WireMessage]

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
	enableThinking, err := req.EnableThinking()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
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
	parseTools, err := protocol.ToolChoiceAutoOrNone(req.ToolChoice, len(req.Tools) > 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
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
	prompt, err := chattemplate.Render(msgs, chattemplate.Options{Tools: req.Tools, AddGenerationPrompt: true, EnableThinking: enableThinking})
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
	maxTok, field := req.MaxCompletion()
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
	choice := protocol.ChatChoice{Message: msg, FinishReason: finish, MatchedStop: matchedStop(res.Finish)}
	if req.WantLogprobs() {
		lps := logprobs(res)
		content := make([]protocol.ChatTokenLogprob, len(res.OutputIDs))
		for i, id := range res.OutputIDs {
			b, _ := tok.TokenBytes(id)
			e := protocol.NewChatTopLogprob(tokenizer.LossyUTF8(b), b, lps[i])
			content[i] = protocol.ChatTokenLogprob{Token: e.Token, Bytes: e.Bytes, Logprob: e.Logprob, TopLogprobs: []protocol.ChatTopLogprob{}}
		}
		choice.Logprobs = &protocol.ChatLogprobs{Content: content}
	}
	out := protocol.ChatResponse{
		ID: "chatcmpl-" + rid, Object: "chat.completion", Created: time.Now().Unix(), Model: s.opts.ModelName,
		Usage:  protocol.NewUsage(res.PromptTokens, len(res.OutputIDs)),
		SGLExt: &protocol.SGLExt{WeightVersion: res.Version, WeightVersions: spans(res.Versions), CachedTokens: res.CachedTokens},
	}
	if req.ReturnTokenIDs != nil && *req.ReturnTokenIDs {
		choice.TokenIDs = outputIDs(res)
		out.PromptTokenIDs = ids
	}
	out.Choices = []protocol.ChatChoice{choice}
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
func chatMessage(text string, parseTools bool, rid, finish string) (protocol.ChatResponseMessage, string) {
	whole := protocol.AssistantMessage(text, nil, nil)
	if !parseTools && !strings.Contains(text, chattemplate.ThinkClose) {
		return whole, finish
	}
	c := chattemplate.ParseCompletion(text)
	if !c.Valid() {
		return whole, finish
	}
	var reasoning *string
	if c.HasThinking {
		reasoning = &c.Reasoning
	}
	var calls []protocol.ToolCall
	if parseTools && len(c.ToolCalls) > 0 {
		for i, tc := range c.ToolCalls {
			call := protocol.NewToolCall(fmt.Sprintf("call_%s_%d", rid, i), tc.Function.Name, string(tc.Function.Arguments))
			call.Index = &i
			calls = append(calls, call)
		}
		if finish == sampler.FinishStop {
			finish = "tool_calls"
		}
	}
	return protocol.AssistantMessage(c.Content, reasoning, calls), finish
}
