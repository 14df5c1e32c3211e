package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"tau2rl/lib/inference/tokenizer"
)

// generate serves SGLang's POST /generate (inference-servers.md §1).
func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		InputIDs       json.RawMessage `json:"input_ids"`
		Text           *string         `json:"text"`
		SamplingParams struct {
			MaxNewTokens *int     `json:"max_new_tokens"`
			Temperature  *float64 `json:"temperature"`
			StopTokenIDs []int32  `json:"stop_token_ids"`
		} `json:"sampling_params"`
		ReturnLogprob bool   `json:"return_logprob"`
		Rid           string `json:"rid"`
		Stream        bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "decode request: "+err.Error())
		return
	}
	if req.Stream {
		writeError(w, http.StatusBadRequest, "streaming is not supported by the scripted server")
		return
	}
	var ids []int32
	switch {
	case req.InputIDs != nil && req.Text != nil:
		writeError(w, http.StatusBadRequest, "Either text, input_ids or input_embeds should be provided.")
		return
	case req.InputIDs != nil:
		var err error
		if ids, err = s.parseIDs(req.InputIDs); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	case req.Text != nil:
		ids = s.tok.Encode(*req.Text)
	default:
		writeError(w, http.StatusBadRequest, "Either text, input_ids or input_embeds should be provided.")
		return
	}
	call, err := s.tokenCall(APIGenerate, r, body, ids)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	call.MaxTokens = 128 // SGLang's default
	if req.SamplingParams.MaxNewTokens != nil {
		if *req.SamplingParams.MaxNewTokens < 0 {
			writeError(w, http.StatusBadRequest, "max_new_tokens must be at least 0")
			return
		}
		call.MaxTokens = *req.SamplingParams.MaxNewTokens
	}
	call.Temperature = req.SamplingParams.Temperature
	g, err := s.complete(r.Context(), call, req.SamplingParams.StopTokenIDs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rid := req.Rid
	if rid == "" {
		rid = fmt.Sprintf("llmtest-%d", call.Seq)
	}
	finish := map[string]any{"type": "stop", "matched": g.matched}
	if g.finish == "length" {
		finish = map[string]any{"type": "length", "length": len(g.ids)}
	}
	meta := map[string]any{
		"id": rid, "finish_reason": finish, "prompt_tokens": len(ids), "completion_tokens": len(g.ids),
		"cached_tokens": 0, "reasoning_tokens": 0, "weight_version": g.version, "num_retractions": 0,
		"e2e_latency": time.Since(start).Seconds(),
	}
	if req.ReturnLogprob {
		out := make([][3]any, len(g.ids))
		for i, id := range g.ids {
			out[i] = [3]any{g.logp[i], id, nil}
		}
		meta["input_token_logprobs"] = [][3]any{{nil, ids[len(ids)-1], nil}}
		meta["output_token_logprobs"] = out
		meta["output_token_logprobs_length"] = len(out)
	}
	text, _ := s.tok.DecodeSkipSpecial(g.ids)
	writeJSON(w, http.StatusOK, map[string]any{"text": text, "output_ids": g.ids, "meta_info": meta})
}

// completions serves vLLM's POST /v1/completions with a token-id or text
// prompt (inference-servers.md §3).
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		Model                  string          `json:"model"`
		Prompt                 json.RawMessage `json:"prompt"`
		MaxTokens              *int            `json:"max_tokens"`
		Temperature            *float64        `json:"temperature"`
		TopK                   *int            `json:"top_k"`
		StopTokenIDs           []int32         `json:"stop_token_ids"`
		Logprobs               *int            `json:"logprobs"`
		Echo                   bool            `json:"echo"`
		N                      *int            `json:"n"`
		Stream                 bool            `json:"stream"`
		ReturnTokenIDs         *bool           `json:"return_token_ids"`
		ReturnTokensAsTokenIDs *bool           `json:"return_tokens_as_token_ids"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "decode request: "+err.Error())
		return
	}
	if req.Stream || req.Echo || (req.N != nil && *req.N != 1) {
		writeError(w, http.StatusBadRequest, "stream, echo and n > 1 are not supported by the scripted server")
		return
	}
	// vLLM's checks, strictest version: before 0.9 it rejected top_k 0 (-1 disables), and a
	// request must name a served model (older versions required the field).
	if req.TopK != nil && (*req.TopK == 0 || *req.TopK < -1) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("top_k must be -1 (disable), or at least 1, got %d.", *req.TopK))
		return
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "model: Field required")
		return
	}
	if req.Model != s.model {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	var ids []int32
	var text string
	if json.Unmarshal(req.Prompt, &text) == nil {
		ids = s.tok.Encode(text)
	} else {
		var err error
		if ids, err = s.parseIDs(req.Prompt); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if len(ids) == 0 {
		writeError(w, http.StatusBadRequest, "empty prompt")
		return
	}
	call, err := s.tokenCall(APICompletions, r, body, ids)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	call.Model = req.Model
	call.MaxTokens = 16 // vLLM's default
	if req.MaxTokens != nil {
		call.MaxTokens = *req.MaxTokens
	}
	call.Temperature = req.Temperature
	g, err := s.complete(r.Context(), call, req.StopTokenIDs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// The text leaves out the EOS token, as vLLM's does.
	textIDs := g.ids
	if g.finish == "stop" && g.matched == s.imEnd {
		textIDs = g.ids[:len(g.ids)-1]
	}
	outText, _ := s.tok.Decode(textIDs)
	asIDs := req.ReturnTokensAsTokenIDs != nil && *req.ReturnTokensAsTokenIDs
	choice := map[string]any{"index": 0, "text": outText, "finish_reason": g.finish, "stop_reason": nil,
		"prompt_logprobs": nil, "routed_experts": nil}
	if g.finish == "stop" && g.matched != s.imEnd {
		choice["stop_reason"] = g.matched
	}
	if req.Logprobs != nil {
		lp := map[string]any{}
		tokens := make([]string, len(g.ids))
		top := make([]map[string]float32, len(g.ids))
		offs := make([]int, len(g.ids))
		off := 0
		for i, id := range g.ids {
			tokens[i] = tokenString(s.tok, id, asIDs)
			top[i] = map[string]float32{tokens[i]: g.logp[i]}
			offs[i] = off
			off += utf8.RuneCountInString(tokenString(s.tok, id, false))
		}
		lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], lp["text_offset"] = tokens, g.logp, top, offs
		choice["logprobs"] = lp
	} else {
		choice["logprobs"] = nil
	}
	if req.ReturnTokenIDs != nil && *req.ReturnTokenIDs {
		choice["token_ids"], choice["prompt_token_ids"] = g.ids, ids
	}
	model := req.Model
	if model == "" {
		model = s.model
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("cmpl-llmtest-%d", call.Seq), "object": "text_completion", "created": time.Now().Unix(),
		"model": model, "choices": []any{choice},
		"usage": map[string]any{"prompt_tokens": len(ids), "completion_tokens": len(g.ids), "total_tokens": len(ids) + len(g.ids)},
	})
}

// tokenString is a token as vLLM names it in logprobs: its text, or
// "token_id:N" with return_tokens_as_token_ids.
func tokenString(tok *tokenizer.Tokenizer, id int32, asID bool) string {
	if asID {
		return "token_id:" + strconv.Itoa(int(id))
	}
	b, _ := tok.TokenBytes(id)
	return tokenizer.LossyUTF8(b)
}

// updateWeightsFromDisk serves SGLang's POST /update_weights_from_disk.
func (s *Server) updateWeightsFromDisk(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req struct {
		ModelPath     string  `json:"model_path"`
		WeightVersion *string `json:"weight_version"`
	}
	if err := json.Unmarshal(body, &req); err != nil || strings.TrimSpace(req.ModelPath) == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false, "message": "model_path is required", "num_paused_requests": 0})
		return
	}
	s.mu.Lock()
	s.modelPath = req.ModelPath
	msg := "Succeeded to update model weights."
	if req.WeightVersion != nil {
		s.version = *req.WeightVersion
		msg += " Weight version updated to " + *req.WeightVersion + "."
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": msg, "num_paused_requests": 0})
}

// vllmReload serves vLLM's dev-mode weight-transfer sequence with the
// shared-disk backend: /pause, /start_weight_update, /update_weights,
// /finish_weight_update, /resume (inference-servers.md §4), enforcing its
// order.
func (s *Server) vllmReload(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.vllm
	fail := func(msg string) { writeJSON(w, http.StatusBadRequest, map[string]any{"error": msg}) }
	switch r.URL.Path {
	case "/pause":
		st.paused = true
		writeJSON(w, http.StatusOK, map[string]any{"status": "paused"})
	case "/resume":
		st.paused = false
		writeJSON(w, http.StatusOK, map[string]any{"status": "resumed"})
	case "/start_weight_update":
		if st.updating {
			fail("a weight update is already in progress")
			return
		}
		st.updating, st.path = true, ""
		writeJSON(w, http.StatusOK, map[string]any{"message": "Weight update started"})
	case "/update_weights":
		var req struct {
			UpdateInfo struct {
				Path string `json:"path"`
			} `json:"update_info"`
		}
		if !st.updating {
			fail("no weight update in progress")
			return
		}
		if err := json.Unmarshal(body, &req); err != nil || req.UpdateInfo.Path == "" {
			fail("update_info.path is required")
			return
		}
		st.path = req.UpdateInfo.Path
		writeJSON(w, http.StatusOK, map[string]any{"message": "Weights updated"})
	case "/finish_weight_update":
		var req struct {
			WeightVersion *string `json:"weight_version"`
		}
		if !st.updating || st.path == "" {
			fail("no weights were updated")
			return
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				fail("decode request: " + err.Error())
				return
			}
		}
		st.updating, s.modelPath = false, st.path
		if req.WeightVersion != nil {
			s.version = *req.WeightVersion
		}
		writeJSON(w, http.StatusOK, map[string]any{"message": "Weight update finished"})
	}
}

func (s *Server) isPaused(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"is_paused": s.vllm.paused})
}
