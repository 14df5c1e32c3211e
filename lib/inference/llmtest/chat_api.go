package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer"
)

// chatRequest is an OpenAI chat request as the Qwen3-template servers read it: tool-call
// arguments may be a JSON string or an object (SGLang's rule), as in tau2-sampler.
type chatRequest = protocol.ChatRequestOf[chattemplate.WireMessage]

// chat serves POST /v1/chat/completions with tools, tool calls and
// log-probs, in vLLM/SGLang's shape (reasoning_content, optional token_ids).
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON request: "+err.Error())
		return
	}
	enableThinking, err := req.EnableThinking()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	stopIDs, err := protocol.StopIDs(req.StopTokenIDs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
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
	opts := chattemplate.Options{Tools: req.Tools, AddGenerationPrompt: true, EnableThinking: enableThinking}
	prompt, err := chattemplate.Render(msgs, opts)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ids := s.tok.Encode(prompt)
	call := &Call{API: APIChat, Model: req.Model, Messages: msgs, Tools: req.Tools, PromptIDs: ids, PromptText: prompt,
		Temperature: req.Temperature, Header: r.Header, Body: body,
		ThinkingOff: enableThinking != nil && !*enableThinking}
	if n, _ := req.MaxCompletion(); n != nil {
		call.MaxTokens = *n
	}
	g, err := s.complete(r.Context(), call, stopIDs)
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
	var reasoning *string
	if parsed.HasThinking {
		reasoning = &parsed.Reasoning
	}
	finish := g.finish
	var calls []protocol.ToolCall
	for i, tc := range parsed.ToolCalls {
		args, err := chattemplate.ToJSON(tc.Function.Arguments)
		if err != nil {
			args = string(tc.Function.Arguments)
		}
		tcall := protocol.NewToolCall(fmt.Sprintf("call_%d_%d", call.Seq, i), tc.Function.Name, args)
		tcall.Index = &i
		calls = append(calls, tcall)
	}
	if len(calls) > 0 && finish == protocol.FinishTypeStop {
		finish = "tool_calls"
	}
	content := parsed.Content
	if !parsed.Valid() && parsed.Content == "" && len(parsed.ToolCalls) == 0 {
		content = text // unparseable output reaches the client as text, as servers pass it through
	}
	choice := protocol.ChatChoice{Message: protocol.AssistantMessage(content, reasoning, calls), FinishReason: finish}
	if req.WantLogprobs() {
		top := 0
		if req.TopLogprobs != nil {
			top = *req.TopLogprobs
		}
		choice.Logprobs = &protocol.ChatLogprobs{Content: chatLogprobs(s.tok, msgIDs, g.logp, top)}
	}
	resp := protocol.ChatResponse{
		ID: fmt.Sprintf("chatcmpl-llmtest-%d", call.Seq), Object: "chat.completion", Created: time.Now().Unix(),
		Model: firstNonEmpty(req.Model, s.model), Usage: protocol.NewUsage(len(ids), len(g.ids)),
	}
	if req.ReturnTokenIDs != nil && *req.ReturnTokenIDs {
		choice.TokenIDs = g.ids
		resp.PromptTokenIDs = ids
	}
	resp.Choices = []protocol.ChatChoice{choice}
	writeJSON(w, http.StatusOK, resp)
}

// chatLogprobs builds OpenAI logprobs content entries; the top list holds
// the sampled token and top-1 made-up alternatives with lower log-probs.
func chatLogprobs(tok *tokenizer.Tokenizer, ids []int32, logp []float32, top int) []protocol.ChatTokenLogprob {
	entry := func(id int32, lp float32) protocol.ChatTopLogprob {
		b, _ := tok.TokenBytes(id)
		return protocol.NewChatTopLogprob(tokenizer.LossyUTF8(b), b, float64(lp))
	}
	out := make([]protocol.ChatTokenLogprob, len(ids))
	for i, id := range ids {
		e := entry(id, logp[i])
		alts := []protocol.ChatTopLogprob{}
		for k := 0; k < top; k++ {
			if k == 0 {
				alts = append(alts, e)
				continue
			}
			alt := (id + int32(k)) % int32(tok.VocabSize())
			alts = append(alts, entry(alt, logp[i]-float32(k)))
		}
		out[i] = protocol.ChatTokenLogprob{Token: e.Token, Bytes: e.Bytes, Logprob: e.Logprob, TopLogprobs: alts}
	}
	return out
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
