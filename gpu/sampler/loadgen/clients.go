package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"tau2rl/gpu"
	"tau2rl/gpu/sampler"
)

// SGLang is a Client for SGLang's POST /generate in token mode (tau2-sampler, SGLang; vLLM
// serves the same route with its SGLang-compatible entrypoint), asking for log-probs as the
// producers do. It also reports KV use from /get_server_info where the server says it
// (tau2-sampler's kv_cache_used_blocks; SGLang's fields differ and are skipped).
type SGLang struct {
	BaseURL string
	HTTP    *http.Client
	// BlockSize converts tau2-sampler's block counts to tokens (its kv.block_size; default 16).
	BlockSize int
}

type generateBody struct {
	InputIDs       []int32        `json:"input_ids"`
	SamplingParams map[string]any `json:"sampling_params"`
	ReturnLogprob  bool           `json:"return_logprob"`
}

// Generate posts one call.
func (c *SGLang) Generate(ctx context.Context, call Call) (Reply, error) {
	body, err := json.Marshal(generateBody{InputIDs: call.InputIDs, ReturnLogprob: true, SamplingParams: map[string]any{
		"max_new_tokens": call.MaxNewTokens, "temperature": 1.0, "top_p": 1.0, "ignore_eos": true, "sampling_seed": call.Seed,
	}})
	if err != nil {
		return Reply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.BaseURL, "/")+"/generate", bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client().Do(req)
	if err != nil {
		return Reply{}, fmt.Errorf("POST /generate: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, fmt.Errorf("POST /generate: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Reply{}, fmt.Errorf("POST /generate: status %d: %.300s", resp.StatusCode, data)
	}
	var out struct {
		OutputIDs []int32 `json:"output_ids"`
		MetaInfo  struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"meta_info"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return Reply{}, fmt.Errorf("POST /generate: answer is not SGLang's shape: %w", err)
	}
	cached := -1
	if out.MetaInfo.CachedTokens != nil {
		cached = *out.MetaInfo.CachedTokens
	}
	return Reply{OutputIDs: out.OutputIDs, CachedTokens: cached}, nil
}

func (c *SGLang) client() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// KVUsage reads tau2-sampler's /get_server_info.
func (c *SGLang) KVUsage(ctx context.Context) (used, total, blockSize int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.BaseURL, "/")+"/get_server_info", nil)
	if err != nil {
		return 0, 0, 0, err
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	var info struct {
		Used  *int `json:"kv_cache_used_blocks"`
		Total *int `json:"kv_cache_blocks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.Used == nil || info.Total == nil {
		return 0, 0, 0, fmt.Errorf("get_server_info: no KV block counts (%v)", err)
	}
	bs := c.BlockSize
	if bs <= 0 {
		bs = 16
	}
	return *info.Used, *info.Total, bs, nil
}

// Engine is a Client over a sampler.Engine in the same process (no HTTP): the engine's own
// throughput, without the wire.
type Engine struct {
	E         *sampler.Engine
	BlockSize int
}

// Generate submits one call.
func (c *Engine) Generate(ctx context.Context, call Call) (Reply, error) {
	seed := call.Seed
	res, err := c.E.Submit(ctx, sampler.Request{Prompt: call.InputIDs, MaxNewTokens: call.MaxNewTokens, IgnoreEOS: true,
		Params: gpu.SampleParams{Temperature: 1, TopP: 1}, Seed: &seed})
	if err != nil {
		return Reply{}, err
	}
	if res.Finish.Type == sampler.FinishAbort {
		return Reply{}, fmt.Errorf("aborted: %s", res.Finish.Message)
	}
	return Reply{OutputIDs: res.OutputIDs, CachedTokens: res.CachedTokens}, nil
}

// KVUsage reads the engine's stats.
func (c *Engine) KVUsage(context.Context) (used, total, blockSize int, err error) {
	st := c.E.Stats()
	return st.UsedBlocks, st.TotalBlocks, c.BlockSize, nil
}
