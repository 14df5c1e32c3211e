package sampler

import (
	"fmt"
	"slices"

	"tau2rl/gpu"
)

// Request is one generation: a prompt in token ids and how to continue it. The HTTP layer fills
// it from SGLang's /generate, vLLM's /v1/completions or an OpenAI chat request.
type Request struct {
	// ID names the request (SGLang rid, vLLM request_id) for /abort_request and the logs.
	ID string
	// Prompt is the whole prompt (chat template already applied).
	Prompt []int32
	// Params are the sampling settings.
	Params gpu.SampleParams
	// MaxNewTokens bounds the completion (0 returns at once with no tokens).
	MaxNewTokens int
	// MaxNewTokensField is what the client called MaxNewTokens (vLLM and OpenAI: max_tokens or
	// max_completion_tokens), so that an error names the field the client sent; default
	// max_new_tokens (SGLang).
	MaxNewTokensField string
	// StopTokenIDs end generation (the matched id is part of the output), in addition to the
	// model's EOS ids unless IgnoreEOS.
	StopTokenIDs []int32
	IgnoreEOS    bool
	// StopStrings end generation once the detokenized output contains one (needs a tokenizer);
	// the output keeps the token that completed it.
	StopStrings []string
	// Seed makes the draws reproducible: the k-th token of a request with seed s is drawn with
	// the uniform number U(s, k), whatever else runs (see Uniform). Without one the engine picks
	// a random seed.
	Seed *uint64
}

// FinishReason says why a request ended, in SGLang's shape.
type FinishReason struct {
	Type string // "stop", "length" or "abort"
	// MatchedToken is the stop token id (EOS or StopTokenIDs), -1 if none.
	MatchedToken int32
	// MatchedString is the stop string that ended generation, "" if none.
	MatchedString string
	// Length is the number of generated tokens when Type is "length".
	Length int
	// Message says why a request was aborted.
	Message string
}

// Finish types.
const (
	FinishStop   = "stop"
	FinishLength = "length"
	FinishAbort  = "abort"
)

// VersionSpan says that output tokens [Start, End) were sampled under weight version Version.
type VersionSpan struct {
	Version string `json:"version"`
	Start   int    `json:"start"`
	End     int    `json:"end"`
}

// Result is a finished request.
type Result struct {
	ID        string
	OutputIDs []int32
	// LogProbs[i] is log softmax(logits/T)[OutputIDs[i]] in fp32, from the logits the token was
	// drawn from (T = 1 when greedy); see gpu.Sampled.LogProb.
	LogProbs []float32
	Finish   FinishReason
	// PromptTokens is len(Prompt); CachedTokens how many of them the prefix cache supplied when
	// the request was first scheduled.
	PromptTokens, CachedTokens int
	// Versions cover OutputIDs: which weight version sampled which tokens. Version is the
	// server's weight version when the request finished.
	Versions []VersionSpan
	Version  string
	// Retractions counts preemptions and weight-update recomputations of this request.
	Retractions int
}

// InputError is a request the engine cannot serve as given (the HTTP layer answers 400).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErr(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// validate checks a request against the model and the pool before it is queued.
func (e *Engine) validate(r *Request) error {
	if len(r.Prompt) == 0 {
		return inputErr("input_ids cannot be empty")
	}
	V := e.mcfg.VocabSize
	for i, t := range r.Prompt {
		if t < 0 || int(t) >= V {
			return inputErr("input_ids[%d] = %d is outside the vocabulary [0, %d)", i, t, V)
		}
	}
	field := r.MaxNewTokensField
	if field == "" {
		field = "max_new_tokens"
	}
	if r.MaxNewTokens < 0 {
		return inputErr("%s must be ≥ 0, got %d", field, r.MaxNewTokens)
	}
	if len(r.Prompt) >= e.ctxLen {
		return inputErr("the prompt has %d tokens; the context length is %d", len(r.Prompt), e.ctxLen)
	}
	// Compared as "max_new_tokens > room left", never as a sum: prompt + max_new_tokens wraps
	// around for values near 2^63 and would pass both checks (issue 27).
	if room := e.ctxLen - len(r.Prompt); r.MaxNewTokens > room {
		return inputErr("%s %d is too large: the prompt (%d tokens) + %[1]s exceeds the context length %[4]d, so at most %[5]d can be generated",
			field, r.MaxNewTokens, len(r.Prompt), e.ctxLen, room)
	}
	if room := e.pool.Total()*e.bs - len(r.Prompt); r.MaxNewTokens > room {
		return inputErr("%s %d is too large: the prompt (%d tokens) and the completion must fit the whole KV cache (%d blocks of %d tokens), so at most %d can be generated",
			field, r.MaxNewTokens, len(r.Prompt), e.pool.Total(), e.bs, max(0, room))
	}
	if err := r.Params.Validate(); err != nil {
		return inputErr("%v", err)
	}
	if r.Params.TopK < 0 {
		return inputErr("top_k %d must be ≥ 0 here (-1 on the wire means off)", r.Params.TopK)
	}
	for i, t := range r.StopTokenIDs {
		if t < 0 {
			return inputErr("stop_token_ids[%d] = %d is negative", i, t)
		}
	}
	if len(r.StopStrings) > 0 && e.tok == nil {
		return inputErr("stop strings need a tokenizer; the server was started without one")
	}
	if slices.Contains(r.StopStrings, "") {
		return inputErr("stop strings must not be empty")
	}
	return nil
}

// Uniform is the draw of a request's k-th token: a counter-based generator (SplitMix64 over the
// seed and k), so the number does not depend on what the engine ran before — a preempted and
// recomputed request, or one batched differently, draws exactly the same numbers.
func Uniform(seed uint64, k int) float64 {
	z := seed + uint64(k+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}
