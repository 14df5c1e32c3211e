package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/sampler"
	"tau2rl/lib/inference/tokenizer"
)

// generateRequest is SGLang's GenerateReqInput, the single-prompt token-mode subset.
type generateRequest struct {
	InputIDs       json.RawMessage `json:"input_ids"`
	Text           json.RawMessage `json:"text"`
	SamplingParams *sglangSampling `json:"sampling_params"`
	ReturnLogprob  bool            `json:"return_logprob"`
	Rid            string          `json:"rid"`
	Stream         bool            `json:"stream"`
	// ReturnPromptTokenIDs adds top-level prompt_token_ids.
	ReturnPromptTokenIDs bool `json:"return_prompt_token_ids"`
}

type sglangSampling struct {
	MaxNewTokens      *int            `json:"max_new_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int            `json:"top_k"`
	MinP              *float64        `json:"min_p"`
	Stop              json.RawMessage `json:"stop"`
	StopTokenIDs      []int64         `json:"stop_token_ids"`
	IgnoreEOS         bool            `json:"ignore_eos"`
	SamplingSeed      *int64          `json:"sampling_seed"`
	N                 *int            `json:"n"`
	SkipSpecialTokens *bool           `json:"skip_special_tokens"`
	NoStopTrim        bool            `json:"no_stop_trim"`
}

// parseIDs reads a single token-id list; a list of lists (a batch) and anything else is an error.
func parseIDs(field string, raw json.RawMessage) ([]int32, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil, fmt.Errorf("%s is required (a list of token ids)", field)
	}
	var ids []int64
	if err := json.Unmarshal(t, &ids); err != nil {
		var batch [][]json.RawMessage
		if json.Unmarshal(t, &batch) == nil {
			return nil, fmt.Errorf("%s: batch requests (a list of lists) are not supported; send one prompt per request", field)
		}
		return nil, fmt.Errorf("%s must be a list of integer token ids: %v", field, err)
	}
	out := make([]int32, len(ids))
	for i, v := range ids {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fmt.Errorf("%s[%d] = %d is outside the vocabulary", field, i, v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

// parseStop reads a stop field: a string or a list of strings.
func parseStop(raw json.RawMessage) ([]string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(t, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(t, &many); err != nil {
		return nil, fmt.Errorf("stop must be a string or a list of strings")
	}
	return many, nil
}

func stopIDs(ids []int64) ([]int32, error) {
	out := make([]int32, len(ids))
	for i, v := range ids {
		if v < 0 || v > math.MaxInt32 {
			return nil, fmt.Errorf("stop_token_ids[%d] = %d is not a token id", i, v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

// samplingOptions parses the sampling settings every endpoint shares: sampling parameters, stop
// strings and stop token ids. A non-empty scope names the object that holds them in the request
// (SGLang's "sampling_params") in the error.
func samplingOptions(scope string, temperature, topP *float64, topK *int, minP *float64, stop json.RawMessage, stopTokenIDs []int64) (gpu.SampleParams, []string, []int32, error) {
	inScope := func(sep string, err error) error {
		if scope == "" {
			return err
		}
		return errors.New(scope + sep + err.Error())
	}
	params, err := sampling(temperature, topP, topK, minP)
	if err != nil {
		return params, nil, nil, inScope(": ", err)
	}
	stops, err := parseStop(stop)
	if err != nil {
		return params, nil, nil, inScope(".", err)
	}
	sids, err := stopIDs(stopTokenIDs)
	if err != nil {
		return params, nil, nil, inScope(".", err)
	}
	return params, stops, sids, nil
}

// sampling converts wire sampling settings (nil: the default 1) into gpu.SampleParams; a
// temperature below 1e-6 is greedy, as in SGLang and vLLM; top_k −1 and 0 are off.
func sampling(temperature, topP *float64, topK *int, minP *float64) (gpu.SampleParams, error) {
	p := gpu.SampleParams{Temperature: 1, TopP: 1}
	if temperature != nil {
		if *temperature < 0 {
			return p, fmt.Errorf("temperature %v must be ≥ 0", *temperature)
		}
		p.Temperature = float32(*temperature)
		if *temperature < 1e-6 {
			p.Temperature = 0
		}
	}
	if topP != nil {
		p.TopP = float32(*topP)
	}
	if topK != nil {
		switch {
		case *topK < -1:
			return p, fmt.Errorf("top_k %d must be -1 (off) or ≥ 0", *topK)
		case *topK > 0:
			p.TopK = int32(min(*topK, math.MaxInt32))
		}
	}
	if minP != nil {
		p.MinP = float32(*minP)
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

func seedOf(s *int64) *uint64 {
	if s == nil {
		return nil
	}
	u := uint64(*s)
	return &u
}

// maxNew is a request's completion bound: an explicit value is kept (the engine rejects one past
// the context); an omitted one is the endpoint's default (SGLang 128, vLLM 16, chat: none),
// clamped to the rest of the context (or of the KV pool, if smaller) as SGLang and vLLM clamp it.
func (s *Server) maxNew(v *int, def, promptLen int) int {
	if v != nil {
		return *v
	}
	rest := max(0, s.eng.Capacity()-promptLen)
	if def > 0 {
		return min(def, rest)
	}
	return rest
}

// generate is SGLang's POST /generate (single prompt, token ids, non-streaming).
func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req generateRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	sp := req.SamplingParams
	if sp == nil {
		sp = &sglangSampling{}
	}
	if msg := oneChoiceNoStream(req.Stream, sp.N, "sampling_params.n"); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if len(bytes.TrimSpace(req.Text)) > 0 && string(bytes.TrimSpace(req.Text)) != "null" {
		writeError(w, http.StatusBadRequest, "text prompts are not supported; send input_ids (token mode)")
		return
	}
	ids, err := parseIDs("input_ids", req.InputIDs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	params, stops, sids, err := samplingOptions("sampling_params", sp.Temperature, sp.TopP, sp.TopK, sp.MinP, sp.Stop, sp.StopTokenIDs)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rid := requestID(req.Rid)
	res, ok := s.submit(w, r, sampler.Request{
		ID: rid, Prompt: ids, Params: params, MaxNewTokens: s.maxNew(sp.MaxNewTokens, 128, len(ids)),
		StopTokenIDs: sids, IgnoreEOS: sp.IgnoreEOS, StopStrings: stops, Seed: seedOf(sp.SamplingSeed),
	})
	if !ok {
		return
	}
	meta := map[string]any{
		"id": rid, "finish_reason": sglangFinish(res.Finish), "prompt_tokens": res.PromptTokens,
		"completion_tokens": len(res.OutputIDs), "cached_tokens": res.CachedTokens, "weight_version": res.Version,
		"weight_versions": spans(res.Versions), "num_retractions": res.Retractions,
		"e2e_latency": time.Since(start).Seconds(),
	}
	if req.ReturnLogprob {
		lps := make([][3]any, len(res.OutputIDs))
		for i, id := range res.OutputIDs {
			lps[i] = [3]any{float64(res.LogProbs[i]), id, nil}
		}
		meta["output_token_logprobs"] = lps
		meta["output_token_logprobs_length"] = len(lps)
		meta["input_token_logprobs"] = [][3]any{{nil, ids[len(ids)-1], nil}}
	}
	out := map[string]any{"output_ids": res.OutputIDs, "meta_info": meta}
	skip := sp.SkipSpecialTokens == nil || *sp.SkipSpecialTokens
	if text, ok := s.text(res, skip, !sp.NoStopTrim); ok {
		out["text"] = text
	}
	if req.ReturnPromptTokenIDs {
		out["prompt_token_ids"] = ids
	}
	writeJSON(w, http.StatusOK, out)
}

func spans(v []sampler.VersionSpan) []sampler.VersionSpan {
	if v == nil {
		return []sampler.VersionSpan{}
	}
	return v
}

func sglangFinish(f sampler.FinishReason) map[string]any {
	switch f.Type {
	case sampler.FinishStop:
		if f.MatchedString != "" {
			return map[string]any{"type": "stop", "matched": f.MatchedString}
		}
		return map[string]any{"type": "stop", "matched": f.MatchedToken}
	case sampler.FinishLength:
		return map[string]any{"type": "length", "length": f.Length}
	}
	return map[string]any{"type": "abort", "message": f.Message, "status_code": nil, "err_type": nil}
}

// text detokenizes a completion as the servers do: the matched stop token or stop string is
// trimmed unless asked to keep it, special tokens skipped if asked. False without a tokenizer.
func (s *Server) text(res sampler.Result, skipSpecial, trimStop bool) (string, bool) {
	tok := s.eng.Tokenizer()
	if tok == nil {
		return "", false
	}
	ids := res.OutputIDs
	if trimStop && res.Finish.Type == sampler.FinishStop && res.Finish.MatchedToken >= 0 && len(ids) > 0 {
		ids = ids[:len(ids)-1]
	}
	b, err := tok.AppendBytes(nil, ids, skipSpecial)
	if err != nil {
		return "", false
	}
	text := tokenizer.LossyUTF8(b)
	if trimStop && res.Finish.MatchedString != "" {
		if i := strings.Index(text, res.Finish.MatchedString); i >= 0 {
			text = text[:i]
		}
	}
	return text, true
}

var idCounter atomic.Uint64

// requestID is the client's request id, or a fresh one when it sent none.
func requestID(given string) string {
	if given != "" {
		return given
	}
	return newID()
}

// newID returns a request id for requests that did not name one.
func newID() string {
	return fmt.Sprintf("%x-%d", time.Now().UnixNano(), idCounter.Add(1))
}
