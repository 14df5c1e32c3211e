package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer"
)

// generate serves SGLang's POST /generate (docs/INFERENCE.md §1).
func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	req, err := protocol.DecodeGenerateRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Stream {
		writeError(w, http.StatusBadRequest, "streaming is not supported by the scripted server")
		return
	}
	var ids []int32
	switch {
	case !protocol.IsNull(req.InputIDs):
		if ids, err = s.parseIDs("input_ids", req.InputIDs); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	case req.Text != nil:
		ids = s.tok.Encode(*req.Text)
	default:
		writeError(w, http.StatusBadRequest, "Either text, input_ids or input_embeds should be provided.")
		return
	}
	sp := req.SamplingParams
	stopIDs, err := protocol.StopIDs(sp.StopTokenIDs)
	if err != nil {
		writeError(w, http.StatusBadRequest, "sampling_params."+err.Error())
		return
	}
	call, err := s.tokenCall(APIGenerate, r, body, ids)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	call.MaxTokens = protocol.SGLangDefaultMaxNewTokens
	if sp.MaxNewTokens != nil {
		if *sp.MaxNewTokens < 0 {
			writeError(w, http.StatusBadRequest, "max_new_tokens must be at least 0")
			return
		}
		call.MaxTokens = *sp.MaxNewTokens
	}
	call.Temperature = sp.Temperature
	g, err := s.complete(r.Context(), call, stopIDs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rid := req.Rid
	if rid == "" {
		rid = fmt.Sprintf("llmtest-%d", call.Seq)
	}
	finish := protocol.StopOnToken(g.matched)
	if g.finish == protocol.FinishTypeLength {
		finish = protocol.StoppedAtLength(len(g.ids))
	}
	out := protocol.GenerateResponse{OutputIDs: g.ids, MetaInfo: protocol.MetaInfo{
		ID: rid, FinishReason: finish, PromptTokens: len(ids), CompletionTokens: len(g.ids),
		WeightVersion: g.version, E2ELatency: time.Since(start).Seconds(),
	}}
	if req.ReturnLogprob {
		out.MetaInfo.SetOutputLogprobs(ids[len(ids)-1], g.ids, g.logprobs())
	}
	text, _ := s.tok.DecodeSkipSpecial(g.ids)
	out.Text = &text
	writeJSON(w, http.StatusOK, out)
}

// completions serves vLLM's POST /v1/completions with a token-id or text
// prompt (docs/INFERENCE.md §3).
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
	if protocol.IsString(req.Prompt) {
		var text string
		if err := json.Unmarshal(req.Prompt, &text); err != nil {
			writeError(w, http.StatusBadRequest, "prompt: "+err.Error())
			return
		}
		if ids = s.tok.Encode(text); len(ids) == 0 {
			writeError(w, http.StatusBadRequest, "prompt cannot be empty.")
			return
		}
	} else if ids, err = s.parseIDs("prompt", req.Prompt); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	stopIDs, err := protocol.StopIDs(req.StopTokenIDs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	call, err := s.tokenCall(APICompletions, r, body, ids)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	call.Model = req.Model
	call.MaxTokens = protocol.VLLMDefaultMaxTokens
	if req.MaxTokens != nil {
		call.MaxTokens = *req.MaxTokens
	}
	call.Temperature = req.Temperature
	g, err := s.complete(r.Context(), call, stopIDs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// The text leaves out the EOS token, as vLLM's does.
	textIDs := g.ids
	if g.finish == protocol.FinishTypeStop && g.matched == s.imEnd {
		textIDs = g.ids[:len(g.ids)-1]
	}
	outText, _ := s.tok.Decode(textIDs)
	choice := protocol.CompletionChoice{Text: outText, FinishReason: &g.finish}
	if g.finish == protocol.FinishTypeStop && g.matched != s.imEnd {
		choice.StopReason = g.matched
	}
	if req.Logprobs != nil {
		asIDs := req.ReturnTokensAsTokenIDs != nil && *req.ReturnTokensAsTokenIDs
		tokens := make([]string, len(g.ids))
		for i, id := range g.ids {
			tokens[i] = tokenString(s.tok, id, asIDs)
		}
		choice.Logprobs = protocol.NewCompletionLogprobs(tokens, g.logprobs())
	}
	if req.ReturnTokenIDs != nil && *req.ReturnTokenIDs {
		choice.TokenIDs, choice.PromptTokenIDs = g.ids, ids
	}
	writeJSON(w, http.StatusOK, protocol.CompletionResponse{
		ID: fmt.Sprintf("cmpl-llmtest-%d", call.Seq), Object: "text_completion", Created: time.Now().Unix(),
		Model: req.Model, Choices: []protocol.CompletionChoice{choice}, Usage: protocol.NewUsage(len(ids), len(g.ids)),
	})
}

// tokenString is a token as vLLM names it in logprobs: its text, or
// "token_id:N" with return_tokens_as_token_ids.
func tokenString(tok *tokenizer.Tokenizer, id int32, asID bool) string {
	if asID {
		return protocol.TokenIDString(id)
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
	var req protocol.UpdateWeightsFromDiskRequest
	if err := json.Unmarshal(body, &req); err != nil || strings.TrimSpace(req.ModelPath) == "" {
		writeJSON(w, http.StatusBadRequest, protocol.UpdateWeightsResponse{Success: new(bool), Message: "model_path is required", NumPausedRequests: 0})
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
	success := true
	writeJSON(w, http.StatusOK, protocol.UpdateWeightsResponse{Success: &success, Message: msg, NumPausedRequests: 0})
}

// updateWeightsFromIPC serves tau2rl's POST /update_weights_from_ipc after ServeIPC, and 404
// (an unknown route, SGLang's answer) before.
func (s *Server) updateWeightsFromIPC(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	gpu := s.ipcGPU
	s.mu.Unlock()
	if gpu == "" {
		http.NotFound(w, r)
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	req, _, err := protocol.DecodeUpdateWeightsFromIPCRequest(body)
	if err == nil && req.Device != gpu {
		err = fmt.Errorf("the weights are on GPU %s, this server runs on %s", req.Device, gpu)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, protocol.UpdateWeightsResponse{Success: new(bool), Message: "Failed to update weights by CUDA IPC: " + err.Error(), NumPausedRequests: 0})
		return
	}
	s.mu.Lock()
	msg := "Succeeded to update model weights by CUDA IPC."
	if req.WeightVersion != nil {
		s.version = *req.WeightVersion
		msg += " Weight version updated to " + *req.WeightVersion + "."
	}
	s.mu.Unlock()
	success := true
	writeJSON(w, http.StatusOK, protocol.UpdateWeightsResponse{Success: &success, Message: msg, NumPausedRequests: 0})
}

// vllmReload serves vLLM's dev-mode weight-transfer sequence with the
// shared-disk backend: /pause, /start_weight_update, /update_weights,
// /finish_weight_update, /resume (docs/INFERENCE.md §4), enforcing its
// order.
func (s *Server) vllmReload(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.vllm
	fail := func(msg string) { writeJSON(w, http.StatusBadRequest, protocol.ControlResponse{Error: msg}) }
	switch r.URL.Path {
	case "/pause":
		st.paused = true
		writeJSON(w, http.StatusOK, protocol.ControlResponse{Status: "paused"})
	case "/resume":
		st.paused = false
		writeJSON(w, http.StatusOK, protocol.ControlResponse{Status: "resumed"})
	case "/start_weight_update":
		if st.updating {
			fail("a weight update is already in progress")
			return
		}
		st.updating, st.path = true, ""
		writeJSON(w, http.StatusOK, protocol.ControlResponse{Message: "Weight update started"})
	case "/update_weights":
		var req protocol.VLLMUpdateWeightsRequest
		if !st.updating {
			fail("no weight update in progress")
			return
		}
		if err := json.Unmarshal(body, &req); err != nil || req.UpdateInfo.Path == "" {
			fail("update_info.path is required")
			return
		}
		st.path = req.UpdateInfo.Path
		writeJSON(w, http.StatusOK, protocol.ControlResponse{Message: "Weights updated"})
	case "/finish_weight_update":
		var req protocol.FinishWeightUpdateRequest
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
		writeJSON(w, http.StatusOK, protocol.ControlResponse{Message: "Weight update finished"})
	}
}

func (s *Server) isPaused(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, protocol.IsPausedResponse{IsPaused: s.vllm.paused})
}
