package httpapi

import (
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
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer"
)

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
	stops, err := protocol.StopStrings(stop)
	if err != nil {
		return params, nil, nil, inScope(".", err)
	}
	sids, err := protocol.StopIDs(stopTokenIDs)
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
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	req, err := protocol.DecodeGenerateRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sp := req.SamplingParams
	if msg := oneChoiceNoStream(req.Stream, sp.N, "sampling_params.n"); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if req.Text != nil {
		writeError(w, http.StatusBadRequest, "text prompts are not supported; send input_ids (token mode)")
		return
	}
	ids, err := protocol.TokenIDs("input_ids", req.InputIDs)
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
		ID: rid, Prompt: ids, Params: params, MaxNewTokens: s.maxNew(sp.MaxNewTokens, protocol.SGLangDefaultMaxNewTokens, len(ids)),
		StopTokenIDs: sids, IgnoreEOS: sp.IgnoreEOS, StopStrings: stops, Seed: seedOf(sp.SamplingSeed),
	})
	if !ok {
		return
	}
	out := protocol.GenerateResponse{OutputIDs: outputIDs(res), MetaInfo: protocol.MetaInfo{
		ID: rid, FinishReason: sglangFinish(res.Finish), PromptTokens: res.PromptTokens,
		CompletionTokens: len(res.OutputIDs), CachedTokens: res.CachedTokens, WeightVersion: res.Version,
		WeightVersions: spans(res.Versions), NumRetractions: res.Retractions, E2ELatency: time.Since(start).Seconds(),
	}}
	if req.ReturnLogprob {
		out.MetaInfo.SetOutputLogprobs(ids[len(ids)-1], res.OutputIDs, logprobs(res))
	}
	skip := sp.SkipSpecialTokens == nil || *sp.SkipSpecialTokens
	if text, ok := s.text(res, skip, !sp.NoStopTrim); ok {
		out.Text = &text
	}
	if req.ReturnPromptTokenIDs {
		out.PromptTokenIDs = ids
	}
	writeJSON(w, http.StatusOK, out)
}

// outputIDs is a result's ids, never null on the wire.
func outputIDs(res sampler.Result) []int32 {
	if res.OutputIDs == nil {
		return []int32{}
	}
	return res.OutputIDs
}

// logprobs widens a result's log-probs for encoding (protocol clamps them).
func logprobs(res sampler.Result) []float64 {
	out := make([]float64, len(res.LogProbs))
	for i, lp := range res.LogProbs {
		out[i] = float64(lp)
	}
	return out
}

// spans converts the engine's version spans to the wire's.
func spans(v []sampler.VersionSpan) []protocol.VersionSpan {
	out := make([]protocol.VersionSpan, len(v))
	for i, s := range v {
		out[i] = protocol.VersionSpan(s)
	}
	return out
}

func sglangFinish(f sampler.FinishReason) *protocol.FinishReason {
	switch f.Type {
	case sampler.FinishStop:
		if f.MatchedString != "" {
			return protocol.StopOnString(f.MatchedString)
		}
		return protocol.StopOnToken(f.MatchedToken)
	case sampler.FinishLength:
		return protocol.StoppedAtLength(f.Length)
	}
	return protocol.Aborted(f.Message)
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
