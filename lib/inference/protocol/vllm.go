package protocol

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// vLLM's OpenAI-compatible completions with a token-id prompt and its dev-mode weight transfer
// (docs/INFERENCE.md §3, §4; vLLM's completion/protocol.py and serving.py).

// VLLMDefaultMaxTokens is vLLM's max_tokens when a request leaves it out: 16.
const VLLMDefaultMaxTokens = 16

// CompletionRequest is vLLM's CompletionRequest, the single-prompt subset. Prompt stays raw
// (a list of ids, a string, or a batch: TokenIDs tells them apart); clients fill it with IDs.
// Optional fields are omitted when unset.
type CompletionRequest struct {
	Model                  string          `json:"model,omitempty"`
	Prompt                 json.RawMessage `json:"prompt"`
	MaxTokens              *int            `json:"max_tokens,omitempty"`
	Temperature            *float64        `json:"temperature,omitempty"`
	TopP                   *float64        `json:"top_p,omitempty"`
	TopK                   *int            `json:"top_k,omitempty"`
	MinP                   *float64        `json:"min_p,omitempty"`
	Stop                   json.RawMessage `json:"stop,omitempty"`
	StopTokenIDs           []int64         `json:"stop_token_ids,omitempty"`
	IgnoreEOS              bool            `json:"ignore_eos,omitempty"`
	Seed                   *int64          `json:"seed,omitempty"`
	Logprobs               *int            `json:"logprobs,omitempty"`
	Echo                   bool            `json:"echo,omitempty"`
	N                      *int            `json:"n,omitempty"`
	Stream                 bool            `json:"stream,omitempty"`
	ReturnTokenIDs         *bool           `json:"return_token_ids,omitempty"`
	ReturnTokensAsTokenIDs *bool           `json:"return_tokens_as_token_ids,omitempty"`
	SkipSpecialTokens      *bool           `json:"skip_special_tokens,omitempty"`
	IncludeStopStrInOutput bool            `json:"include_stop_str_in_output,omitempty"`
	RequestID              string          `json:"request_id,omitempty"`
}

// DecodeCompletionRequest parses a /v1/completions body.
func DecodeCompletionRequest(body []byte) (CompletionRequest, error) {
	var req CompletionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, fmt.Errorf("malformed JSON request: %w", err)
	}
	return req, nil
}

// CompletionResponse is vLLM's CompletionResponse. WeightVersion and WeightVersions are
// tau2-sampler's extension (SGLang's meta_info fields, which vLLM lacks); clients of a real
// vLLM never see them.
type CompletionResponse struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"`
	Created        int64              `json:"created"`
	Model          string             `json:"model"`
	Choices        []CompletionChoice `json:"choices"`
	Usage          Usage              `json:"usage"`
	WeightVersion  string             `json:"weight_version,omitempty"`
	WeightVersions []VersionSpan      `json:"weight_versions,omitempty"`
}

// CompletionChoice is one choice: the text (without the EOS token), log-probs when asked, why it
// finished and, with return_token_ids, the output ids (with the sampled EOS/stop token) and
// the prompt's ids. StopReason is the stop string or stop token id, null for EOS and length.
type CompletionChoice struct {
	Index          int                 `json:"index"`
	Text           string              `json:"text"`
	Logprobs       *CompletionLogprobs `json:"logprobs"`
	FinishReason   *string             `json:"finish_reason"`
	StopReason     any                 `json:"stop_reason"`
	TokenIDs       []int32             `json:"token_ids,omitempty"`
	PromptTokenIDs []int32             `json:"prompt_token_ids,omitempty"`
	PromptLogprobs json.RawMessage     `json:"prompt_logprobs"`
	RoutedExperts  *string             `json:"routed_experts"`
}

// CompletionLogprobs is vLLM's logprobs object of a completion choice.
type CompletionLogprobs struct {
	TextOffset    []int                `json:"text_offset"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	Tokens        []string             `json:"tokens"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
}

// Usage is the token accounting of OpenAI-shaped responses; PromptTokensDetails carries
// cached_tokens where a server reports it.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails is usage.prompt_tokens_details.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// NewUsage counts a prompt and a completion.
func NewUsage(prompt, completion int) Usage {
	return Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

// TokenIDString is a token as vLLM names it with return_tokens_as_token_ids: "token_id:N".
func TokenIDString(id int32) string { return "token_id:" + strconv.Itoa(int(id)) }

// ParseTokenIDString reads "token_id:N" back.
func ParseTokenIDString(s string) (int32, bool) {
	rest, ok := strings.CutPrefix(s, "token_id:")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	return int32(n), err == nil
}

// NewCompletionLogprobs builds the logprobs of a choice whose output tokens are reported as
// tokens (their decoded text, or TokenIDString with return_tokens_as_token_ids) with log-probs
// logprobs, as vLLM's _create_completion_logprobs does with logprobs=0: each log-prob clamped
// (ClampLogprob), top_logprobs holding just the sampled token, and text_offset the cumulative
// length of the reported token strings in Unicode code points (Python's len), starting at 0.
func NewCompletionLogprobs(tokens []string, logprobs []float64) *CompletionLogprobs {
	n := len(tokens)
	out := &CompletionLogprobs{TextOffset: make([]int, n), TokenLogprobs: make([]*float64, n), Tokens: tokens,
		TopLogprobs: make([]map[string]float64, n)}
	off := 0
	for i, tok := range tokens {
		lp := ClampLogprob(logprobs[i])
		out.TokenLogprobs[i] = &lp
		out.TopLogprobs[i] = map[string]float64{tok: lp}
		out.TextOffset[i] = off
		off += utf8.RuneCountInString(tok)
	}
	return out
}

// VLLMUpdateWeightsRequest is vLLM's dev-mode POST /update_weights body with the shared-disk
// weight-transfer backend: {"update_info": {"path": dir}}.
type VLLMUpdateWeightsRequest struct {
	UpdateInfo struct {
		Path string `json:"path"`
	} `json:"update_info"`
}

// NewVLLMUpdateWeights is the /update_weights body for a checkpoint directory.
func NewVLLMUpdateWeights(path string) VLLMUpdateWeightsRequest {
	var r VLLMUpdateWeightsRequest
	r.UpdateInfo.Path = path
	return r
}

// FinishWeightUpdateRequest is vLLM's dev-mode POST /finish_weight_update body.
type FinishWeightUpdateRequest struct {
	WeightVersion *string `json:"weight_version,omitempty"`
}
