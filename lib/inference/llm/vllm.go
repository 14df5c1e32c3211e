package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"tau2rl/lib/inference/protocol"
)

// VLLM is a Policy on vLLM's POST /v1/completions with a token-id prompt
// (docs/INFERENCE.md §3), asking for token ids back (return_token_ids)
// and log-probs of the sampled tokens (logprobs: 0). go-openai cannot send a
// token-id prompt, hence plain net/http.
type VLLM struct {
	ep    *Endpoint
	model string
}

// NewVLLM returns a client for the vLLM server at ep; model is its served
// model name, sent with every request (required: vLLM's OpenAI server checks
// it, and with LoRA adapters loaded /v1/models lists several, so guessing
// one would be wrong; configurations require policy.model for vLLM).
func NewVLLM(ep *Endpoint, model string) *VLLM { return &VLLM{ep: ep, model: model} }

// Generate implements Policy.
func (c *VLLM) Generate(ctx context.Context, req GenerateRequest) (GenerateResult, error) {
	const op = "completions"
	if err := req.validate(); err != nil {
		return GenerateResult{}, &Error{Endpoint: c.ep.name, Op: op, Kind: ErrRejected, Err: err}
	}
	// Every sampling field is sent (vLLM's max_tokens default is 16); top_k −1 disables, as
	// vLLM before 0.9 rejects 0.
	body, err := json.Marshal(protocol.CompletionRequest{
		Model: c.model, Prompt: protocol.IDs(req.InputIDs), MaxTokens: &req.MaxNewTokens,
		Temperature: &req.Temperature, TopP: ptr(req.topP()), TopK: ptr(req.topK()), MinP: &req.MinP,
		StopTokenIDs: widen(req.StopTokenIDs), Seed: req.Seed, Logprobs: ptr(0),
		ReturnTokenIDs: ptr(true), ReturnTokensAsTokenIDs: ptr(true), SkipSpecialTokens: ptr(false),
		RequestID: req.RequestID,
	})
	if err != nil {
		return GenerateResult{}, &Error{Endpoint: c.ep.name, Op: op, Kind: ErrRejected, Err: err}
	}
	start := time.Now()
	var res GenerateResult
	if _, err := c.ep.DoCheck(ctx, op, http.MethodPost, "/v1/completions", body, func(data []byte) (err error) {
		res, err = decodeVLLM(data)
		return err
	}); err != nil {
		return GenerateResult{}, err
	}
	res.Latency = time.Since(start)
	if res.PromptTokens == 0 {
		res.PromptTokens = len(req.InputIDs)
	}
	c.ep.metrics.Tokens(c.ep.name, len(req.InputIDs), len(res.OutputIDs))
	return res, nil
}

func decodeVLLM(data []byte) (GenerateResult, error) {
	var r protocol.CompletionResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return GenerateResult{}, fmt.Errorf("decode /v1/completions response: %w", err)
	}
	if len(r.Choices) != 1 {
		return GenerateResult{}, fmt.Errorf("want 1 choice, got %d", len(r.Choices))
	}
	ch := r.Choices[0]
	if ch.Logprobs == nil {
		return GenerateResult{}, fmt.Errorf("choice has no logprobs")
	}
	ids := ch.TokenIDs
	if ids == nil { // older servers: recover ids from "token_id:N" strings
		ids = make([]int32, len(ch.Logprobs.Tokens))
		for i, t := range ch.Logprobs.Tokens {
			id, ok := protocol.ParseTokenIDString(t)
			if !ok {
				return GenerateResult{}, fmt.Errorf("no token_ids and logprobs.tokens[%d]=%q is not token_id:N", i, t)
			}
			ids[i] = id
		}
	}
	if len(ch.Logprobs.TokenLogprobs) != len(ids) {
		return GenerateResult{}, fmt.Errorf("%d token_logprobs for %d token_ids", len(ch.Logprobs.TokenLogprobs), len(ids))
	}
	res := GenerateResult{OutputIDs: ids, Logprobs: make([]float32, len(ids)), MatchedStop: -1, PromptTokens: r.Usage.PromptTokens}
	for i, lp := range ch.Logprobs.TokenLogprobs {
		if lp == nil {
			return GenerateResult{}, fmt.Errorf("token_logprobs[%d] is null", i)
		}
		res.Logprobs[i] = float32(*lp)
	}
	if ch.FinishReason == nil {
		return GenerateResult{}, fmt.Errorf("finish_reason is null")
	}
	switch *ch.FinishReason {
	case protocol.FinishTypeStop:
		res.FinishReason = FinishStop
		switch v := ch.StopReason.(type) {
		case float64:
			res.MatchedStop = int32(v)
		case nil:
			if len(ids) > 0 { // EOS: the last token is the EOS id
				res.MatchedStop = ids[len(ids)-1]
			}
		}
	case protocol.FinishTypeLength:
		res.FinishReason = FinishLength
	case protocol.FinishTypeAbort:
		res.FinishReason = FinishAbort
	default:
		return GenerateResult{}, fmt.Errorf("unknown finish_reason %q", *ch.FinishReason)
	}
	return res, nil
}
