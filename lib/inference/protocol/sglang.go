package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// SGLang's native API (docs/INFERENCE.md §1, §2; SGLang's io_struct.py).

// SGLangDefaultMaxNewTokens is SGLang's max_new_tokens when a request leaves it out: only 128,
// which is why the client always sends it.
const SGLangDefaultMaxNewTokens = 128

// GenerateRequest is SGLang's GenerateReqInput, the single-prompt subset: exactly one of
// input_ids (token mode, what tau2rl sends) and text. InputIDs stays raw so that a server can
// tell a missing field, a batch (a list of lists) and a bad id apart (TokenIDs); clients fill it
// with IDs. Every optional field is omitted when unset, so a server applies its own default.
type GenerateRequest struct {
	InputIDs       json.RawMessage `json:"input_ids,omitempty"`
	Text           *string         `json:"text,omitempty"`
	SamplingParams *SamplingParams `json:"sampling_params,omitempty"`
	ReturnLogprob  bool            `json:"return_logprob,omitempty"`
	Rid            string          `json:"rid,omitempty"`
	Stream         bool            `json:"stream,omitempty"`
	// ReturnPromptTokenIDs adds top-level prompt_token_ids to the response.
	ReturnPromptTokenIDs bool `json:"return_prompt_token_ids,omitempty"`
}

// SamplingParams is SGLang's sampling_params. A nil pointer (absent or JSON null) is the
// server's default: max_new_tokens 128, temperature 1 (below 1e-6 greedy), top_p 1, top_k off
// (−1), min_p 0. stop strings need the server's tokenizer.
type SamplingParams struct {
	MaxNewTokens      *int            `json:"max_new_tokens,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	TopK              *int            `json:"top_k,omitempty"`
	MinP              *float64        `json:"min_p,omitempty"`
	Stop              json.RawMessage `json:"stop,omitempty"`
	StopTokenIDs      []int64         `json:"stop_token_ids,omitempty"`
	IgnoreEOS         bool            `json:"ignore_eos,omitempty"`
	SamplingSeed      *int64          `json:"sampling_seed,omitempty"`
	N                 *int            `json:"n,omitempty"`
	SkipSpecialTokens *bool           `json:"skip_special_tokens,omitempty"`
	NoStopTrim        bool            `json:"no_stop_trim,omitempty"`
}

// DecodeGenerateRequest parses a /generate body and checks what every server checks before
// reading the prompt: one of input_ids and text, not both, not neither.
func DecodeGenerateRequest(body []byte) (GenerateRequest, error) {
	var req GenerateRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, fmt.Errorf("malformed JSON request: %w", err)
	}
	if !IsNull(req.InputIDs) && req.Text != nil {
		//lint:ignore ST1005 SGLang's own text, which clients may match on
		return req, errors.New("Either text, input_ids or input_embeds should be provided.")
	}
	if req.SamplingParams == nil {
		req.SamplingParams = &SamplingParams{}
	}
	return req, nil
}

// GenerateResponse is a non-streaming /generate answer. Text is absent under
// --skip-tokenizer-init (AReaL's setup); tau2rl's client never reads it.
type GenerateResponse struct {
	Text           *string  `json:"text,omitempty"`
	OutputIDs      []int32  `json:"output_ids"`
	MetaInfo       MetaInfo `json:"meta_info"`
	PromptTokenIDs []int32  `json:"prompt_token_ids,omitempty"`
}

// MetaInfo is SGLang's meta_info: the request id, why it finished, token counts, the weight
// version(s) that sampled it and, with return_logprob, one log-prob triple per output token.
type MetaInfo struct {
	ID                        string          `json:"id"`
	FinishReason              *FinishReason   `json:"finish_reason"`
	PromptTokens              int             `json:"prompt_tokens"`
	CompletionTokens          int             `json:"completion_tokens"`
	CachedTokens              int             `json:"cached_tokens"`
	ReasoningTokens           int             `json:"reasoning_tokens"`
	WeightVersion             string          `json:"weight_version"`
	WeightVersions            []VersionSpan   `json:"weight_versions,omitempty"`
	NumRetractions            int             `json:"num_retractions"`
	E2ELatency                float64         `json:"e2e_latency"`
	InputTokenLogprobs        []LogprobTriple `json:"input_token_logprobs,omitempty"`
	OutputTokenLogprobs       []LogprobTriple `json:"output_token_logprobs,omitempty"`
	OutputTokenLogprobsLength *int            `json:"output_token_logprobs_length,omitempty"`
}

// SetOutputLogprobs fills the return_logprob fields: one triple per output token (log-probs
// clamped, ClampLogprob), their count, and SGLang's single default input entry (position
// len(prompt)-1, log-prob null).
func (m *MetaInfo) SetOutputLogprobs(promptLast int32, ids []int32, logprobs []float64) {
	m.OutputTokenLogprobs = make([]LogprobTriple, len(ids))
	for i, id := range ids {
		lp := ClampLogprob(logprobs[i])
		m.OutputTokenLogprobs[i] = LogprobTriple{Logprob: &lp, TokenID: id}
	}
	n := len(ids)
	m.OutputTokenLogprobsLength = &n
	m.InputTokenLogprobs = []LogprobTriple{{TokenID: promptLast}}
}

// VersionSpan says which weight version sampled output tokens [Start, End).
type VersionSpan struct {
	Version string `json:"version"`
	Start   int    `json:"start"`
	End     int    `json:"end"`
}

// LogprobTriple is SGLang's (logprob, token_id, text) tuple, a JSON array of three: the
// log-prob (null for a prompt position without one), the id, and the token's text (null unless
// return_text_in_logprobs).
type LogprobTriple struct {
	Logprob *float64
	TokenID int32
	Text    *string
}

// MarshalJSON implements json.Marshaler.
func (t LogprobTriple) MarshalJSON() ([]byte, error) {
	return json.Marshal([3]any{t.Logprob, t.TokenID, t.Text})
}

// UnmarshalJSON implements json.Unmarshaler: exactly three elements, a number or null, an
// integer id, a string or null.
func (t *LogprobTriple) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 3 {
		return fmt.Errorf("a log-prob entry must be [logprob, token_id, text], got %.40s", b)
	}
	*t = LogprobTriple{}
	if !IsNull(raw[0]) {
		var lp float64
		if err := json.Unmarshal(raw[0], &lp); err != nil {
			return fmt.Errorf("log-prob entry: logprob %.20s is not a number", raw[0])
		}
		t.Logprob = &lp
	}
	if err := json.Unmarshal(raw[1], &t.TokenID); err != nil {
		return fmt.Errorf("log-prob entry: token id %.20s is not an int32", raw[1])
	}
	if !IsNull(raw[2]) {
		var s string
		if err := json.Unmarshal(raw[2], &s); err != nil {
			return fmt.Errorf("log-prob entry: text %.20s is not a string", raw[2])
		}
		t.Text = &s
	}
	return nil
}

// SGLang's finish_reason types.
const (
	FinishTypeStop   = "stop"
	FinishTypeLength = "length"
	FinishTypeAbort  = "abort"
)

// FinishReason is SGLang's finish_reason object: {"type": "stop", "matched": id or string},
// {"type": "length", "length": n} or {"type": "abort", "message", "status_code", "err_type"}.
// Build one with StopOnToken, StopOnString, StoppedAtLength or Aborted; each encodes only its
// type's fields, as SGLang's FINISH_*.to_json do.
type FinishReason struct {
	Type string
	// Matched is the stop token id or stop string (stop); raw as sent.
	Matched json.RawMessage
	// Length is the completion length (length).
	Length int
	// Message, StatusCode and ErrType describe an abort.
	Message    string
	StatusCode *int
	ErrType    *string
}

// StopOnToken is a stop on a token id (EOS or stop_token_ids).
func StopOnToken(id int32) *FinishReason {
	return &FinishReason{Type: FinishTypeStop, Matched: json.RawMessage(strconv.Itoa(int(id)))}
}

// StopOnString is a stop on a stop string.
func StopOnString(s string) *FinishReason {
	b, _ := json.Marshal(s)
	return &FinishReason{Type: FinishTypeStop, Matched: b}
}

// StoppedAtLength is a stop at the token budget.
func StoppedAtLength(n int) *FinishReason { return &FinishReason{Type: FinishTypeLength, Length: n} }

// Aborted is an aborted request (by /abort_request, a pause or a weight update).
func Aborted(msg string) *FinishReason { return &FinishReason{Type: FinishTypeAbort, Message: msg} }

// MatchedToken is the stop token id a stop matched; false for a stop string or no stop.
func (f *FinishReason) MatchedToken() (int32, bool) {
	var id int32
	if f == nil || f.Type != FinishTypeStop || json.Unmarshal(f.Matched, &id) != nil {
		return 0, false
	}
	return id, true
}

type finishStop struct {
	Type    string          `json:"type"`
	Matched json.RawMessage `json:"matched"`
}

type finishLength struct {
	Type   string `json:"type"`
	Length int    `json:"length"`
}

type finishAbort struct {
	Type       string  `json:"type"`
	Message    string  `json:"message"`
	StatusCode *int    `json:"status_code"`
	ErrType    *string `json:"err_type"`
}

// MarshalJSON implements json.Marshaler.
func (f FinishReason) MarshalJSON() ([]byte, error) {
	switch f.Type {
	case FinishTypeStop:
		m := f.Matched
		if IsNull(m) {
			m = json.RawMessage("null")
		}
		return json.Marshal(finishStop{f.Type, m})
	case FinishTypeLength:
		return json.Marshal(finishLength{f.Type, f.Length})
	}
	return json.Marshal(finishAbort{f.Type, f.Message, f.StatusCode, f.ErrType})
}

// UnmarshalJSON implements json.Unmarshaler; an unknown type is kept for the caller to refuse.
func (f *FinishReason) UnmarshalJSON(b []byte) error {
	var v struct {
		Type       string          `json:"type"`
		Matched    json.RawMessage `json:"matched"`
		Length     int             `json:"length"`
		Message    string          `json:"message"`
		StatusCode *int            `json:"status_code"`
		ErrType    *string         `json:"err_type"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("finish_reason: %w", err)
	}
	*f = FinishReason{Type: v.Type, Matched: v.Matched, Length: v.Length, Message: v.Message, StatusCode: v.StatusCode, ErrType: v.ErrType}
	return nil
}

// UpdateWeightsFromDiskRequest is SGLang's POST /update_weights_from_disk body (§2). Unset
// optional fields are omitted: load_format keeps the server's, flush_cache defaults to true.
type UpdateWeightsFromDiskRequest struct {
	ModelPath        string  `json:"model_path"`
	LoadFormat       *string `json:"load_format,omitempty"`
	AbortAllRequests bool    `json:"abort_all_requests"`
	WeightVersion    *string `json:"weight_version,omitempty"`
	FlushCache       *bool   `json:"flush_cache,omitempty"`
}

// UpdateWeightsResponse answers /update_weights_from_disk: success, the message and the
// number of paused requests (a list with several data-parallel workers, hence any).
type UpdateWeightsResponse struct {
	Success           *bool  `json:"success"`
	Message           string `json:"message"`
	NumPausedRequests any    `json:"num_paused_requests,omitempty"`
}

// UpdateWeightVersionRequest is SGLang's POST /update_weight_version body;
// abort_all_requests defaults to true.
type UpdateWeightVersionRequest struct {
	NewVersion       *string `json:"new_version"`
	AbortAllRequests *bool   `json:"abort_all_requests,omitempty"`
}

// UpdateWeightVersionResponse answers /update_weight_version.
type UpdateWeightVersionResponse struct {
	Success    bool   `json:"success"`
	Message    string `json:"message"`
	NewVersion string `json:"new_version,omitempty"`
}

// PauseGenerationRequest is SGLang's POST /pause_generation body: mode abort (default),
// retract or in_place.
type PauseGenerationRequest struct {
	Mode string `json:"mode,omitempty"`
}

// AbortRequest is SGLang's POST /abort_request body: one rid, or all.
type AbortRequest struct {
	Rid      *string `json:"rid,omitempty"`
	AbortAll bool    `json:"abort_all,omitempty"`
}

// ControlResponse is the answer of the control endpoints of both servers: SGLang's
// {"message", "status": "ok"}, vLLM's {"status": "paused"}, {"message": "Weights updated"} and
// its dev-mode failures {"error": "…"}.
type ControlResponse struct {
	Message string `json:"message,omitempty"`
	Status  string `json:"status,omitempty"`
	Error   string `json:"error,omitempty"`
}

// IsPausedResponse answers vLLM's GET /is_paused.
type IsPausedResponse struct {
	IsPaused bool `json:"is_paused"`
}
