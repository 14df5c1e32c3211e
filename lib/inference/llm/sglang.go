package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"tau2rl/lib/inference/protocol"
)

// SGLang is a Policy on SGLang's native POST /generate with input_ids
// (docs/INFERENCE.md §1): it works with or without --skip-tokenizer-init,
// since it never reads the server's text.
type SGLang struct{ ep *Endpoint }

// NewSGLang returns a client for the SGLang server at ep.
func NewSGLang(ep *Endpoint) *SGLang { return &SGLang{ep: ep} }

// Generate implements Policy.
func (c *SGLang) Generate(ctx context.Context, req GenerateRequest) (GenerateResult, error) {
	const op = "generate"
	if err := req.validate(); err != nil {
		return GenerateResult{}, &Error{Endpoint: c.ep.name, Op: op, Kind: ErrRejected, Err: err}
	}
	// Every sampling field is sent: SGLang's max_new_tokens default is only 128, and an omitted
	// temperature would be the server's default, not the request's 0 (greedy).
	body, err := json.Marshal(protocol.GenerateRequest{
		InputIDs: protocol.IDs(req.InputIDs),
		SamplingParams: &protocol.SamplingParams{
			MaxNewTokens: &req.MaxNewTokens, Temperature: &req.Temperature, TopP: ptr(req.topP()), TopK: ptr(req.topK()),
			MinP: &req.MinP, StopTokenIDs: widen(req.StopTokenIDs), SamplingSeed: req.Seed,
		},
		ReturnLogprob: true,
		Rid:           req.RequestID,
	})
	if err != nil {
		return GenerateResult{}, &Error{Endpoint: c.ep.name, Op: op, Kind: ErrRejected, Err: err}
	}
	start := time.Now()
	var res GenerateResult
	if _, err := c.ep.DoCheck(ctx, op, http.MethodPost, "/generate", body, func(data []byte) (err error) {
		res, err = decodeSGLang(data)
		return err
	}); err != nil {
		return GenerateResult{}, err
	}
	res.Latency = time.Since(start)
	c.ep.metrics.Tokens(c.ep.name, len(req.InputIDs), len(res.OutputIDs))
	return res, nil
}

// decodeSGLang checks and converts a /generate response.
func decodeSGLang(data []byte) (GenerateResult, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		return GenerateResult{}, fmt.Errorf("got a batch (JSON array) response to a single prompt")
	}
	var r protocol.GenerateResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return GenerateResult{}, fmt.Errorf("decode /generate response: %w", err)
	}
	m := r.MetaInfo
	if m.FinishReason == nil {
		return GenerateResult{}, fmt.Errorf("meta_info.finish_reason is missing")
	}
	res := GenerateResult{OutputIDs: r.OutputIDs, MatchedStop: -1, WeightVersion: m.WeightVersion,
		PromptTokens: m.PromptTokens, CachedTokens: m.CachedTokens}
	if res.OutputIDs == nil {
		res.OutputIDs = []int32{}
	}
	switch m.FinishReason.Type {
	case protocol.FinishTypeStop:
		res.FinishReason = FinishStop
		if id, ok := m.FinishReason.MatchedToken(); ok {
			res.MatchedStop = id
		}
	case protocol.FinishTypeLength:
		res.FinishReason = FinishLength
	case protocol.FinishTypeAbort:
		res.FinishReason = FinishAbort
	default:
		return GenerateResult{}, fmt.Errorf("unknown finish_reason type %q", m.FinishReason.Type)
	}
	if len(m.OutputTokenLogprobs) != len(res.OutputIDs) {
		return GenerateResult{}, fmt.Errorf("%d output_token_logprobs for %d output_ids", len(m.OutputTokenLogprobs), len(res.OutputIDs))
	}
	res.Logprobs = make([]float32, len(res.OutputIDs))
	for i, tr := range m.OutputTokenLogprobs {
		if tr.Logprob == nil {
			return GenerateResult{}, fmt.Errorf("output_token_logprobs[%d]: logprob is null", i)
		}
		if tr.TokenID != res.OutputIDs[i] {
			return GenerateResult{}, fmt.Errorf("output_token_logprobs[%d]: token %d does not match output_ids[%d]=%d", i, tr.TokenID, i, res.OutputIDs[i])
		}
		res.Logprobs[i] = float32(*tr.Logprob)
	}
	if len(m.WeightVersions) > 0 {
		for _, s := range m.WeightVersions {
			if s.Start < 0 || s.End < s.Start || s.End > len(res.OutputIDs) {
				return GenerateResult{}, fmt.Errorf("weight_versions span [%d, %d) outside %d output tokens", s.Start, s.End, len(res.OutputIDs))
			}
			res.VersionSpans = append(res.VersionSpans, VersionSpan(s))
		}
	} else if m.WeightVersion != "" && len(res.OutputIDs) > 0 {
		res.VersionSpans = []VersionSpan{{Version: m.WeightVersion, Start: 0, End: len(res.OutputIDs)}}
	}
	return res, nil
}

func ptr[T any](v T) *T { return &v }

// widen converts token ids to the wire's stop_token_ids.
func widen(ids []int32) []int64 {
	if ids == nil {
		return nil
	}
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}
