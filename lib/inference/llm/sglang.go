package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// SGLang is a Policy on SGLang's native POST /generate with input_ids
// (inference-servers.md §1): it works with or without --skip-tokenizer-init,
// since it never reads the server's text.
type SGLang struct{ ep *Endpoint }

// NewSGLang returns a client for the SGLang server at ep.
func NewSGLang(ep *Endpoint) *SGLang { return &SGLang{ep: ep} }

// Wire format of POST /generate (single prompt, non-streaming).
type sglangGenerateRequest struct {
	InputIDs       []int32        `json:"input_ids"`
	SamplingParams sglangSampling `json:"sampling_params"`
	ReturnLogprob  bool           `json:"return_logprob"`
	Rid            string         `json:"rid,omitempty"`
}

type sglangSampling struct {
	MaxNewTokens int     `json:"max_new_tokens"`
	Temperature  float64 `json:"temperature"` // always sent: 0 is greedy
	TopP         float64 `json:"top_p"`
	TopK         int     `json:"top_k"` // -1 disables
	MinP         float64 `json:"min_p"`
	StopTokenIDs []int32 `json:"stop_token_ids,omitempty"`
	SamplingSeed *int64  `json:"sampling_seed,omitempty"`
}

type sglangGenerateResponse struct {
	Text      *string        `json:"text"`
	OutputIDs []int32        `json:"output_ids"`
	MetaInfo  sglangMetaInfo `json:"meta_info"`
}

type sglangMetaInfo struct {
	ID                  string              `json:"id"`
	FinishReason        *sglangFinishReason `json:"finish_reason"`
	PromptTokens        int                 `json:"prompt_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	CachedTokens        int                 `json:"cached_tokens"`
	WeightVersion       string              `json:"weight_version"`
	WeightVersions      []sglangVersionSpan `json:"weight_versions,omitempty"`
	OutputTokenLogprobs [][3]any            `json:"output_token_logprobs"`
}

type sglangFinishReason struct {
	Type    string          `json:"type"`
	Matched json.RawMessage `json:"matched,omitempty"`
	Length  int             `json:"length,omitempty"`
	Message string          `json:"message,omitempty"`
}

type sglangVersionSpan struct {
	Version string `json:"version"`
	Start   int    `json:"start"`
	End     int    `json:"end"`
}

// Generate implements Policy.
func (c *SGLang) Generate(ctx context.Context, req GenerateRequest) (GenerateResult, error) {
	const op = "generate"
	if err := req.validate(); err != nil {
		return GenerateResult{}, &Error{Endpoint: c.ep.name, Op: op, Kind: ErrRejected, Err: err}
	}
	body, err := json.Marshal(sglangGenerateRequest{
		InputIDs: req.InputIDs,
		SamplingParams: sglangSampling{
			MaxNewTokens: req.MaxNewTokens, Temperature: req.Temperature, TopP: req.topP(), TopK: req.topK(),
			MinP: req.MinP, StopTokenIDs: req.StopTokenIDs, SamplingSeed: req.Seed,
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
	var r sglangGenerateResponse
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
	case "stop":
		res.FinishReason = FinishStop
		var id int32
		if json.Unmarshal(m.FinishReason.Matched, &id) == nil {
			res.MatchedStop = id
		}
	case "length":
		res.FinishReason = FinishLength
	case "abort":
		res.FinishReason = FinishAbort
	default:
		return GenerateResult{}, fmt.Errorf("unknown finish_reason type %q", m.FinishReason.Type)
	}
	if len(m.OutputTokenLogprobs) != len(res.OutputIDs) {
		return GenerateResult{}, fmt.Errorf("%d output_token_logprobs for %d output_ids", len(m.OutputTokenLogprobs), len(res.OutputIDs))
	}
	res.Logprobs = make([]float32, len(res.OutputIDs))
	for i, tr := range m.OutputTokenLogprobs {
		lp, ok := tr[0].(float64)
		if !ok {
			return GenerateResult{}, fmt.Errorf("output_token_logprobs[%d]: logprob %v is not a number", i, tr[0])
		}
		id, ok := tr[1].(float64)
		if !ok || int32(id) != res.OutputIDs[i] {
			return GenerateResult{}, fmt.Errorf("output_token_logprobs[%d]: token %v does not match output_ids[%d]=%d", i, tr[1], i, res.OutputIDs[i])
		}
		res.Logprobs[i] = float32(lp)
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
