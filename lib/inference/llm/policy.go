package llm

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GenerateRequest is one token-mode policy call.
type GenerateRequest struct {
	// InputIDs is the whole prompt as token ids (the chat template already
	// applied by the caller).
	InputIDs []int32
	// MaxNewTokens bounds the completion; required (> 0).
	MaxNewTokens int
	// Temperature is always sent, 0 included (greedy).
	Temperature float64
	// TopP in (0, 1]; 0 is sent as 1 (disabled).
	TopP float64
	// TopK ≤ 0 disables top-k.
	TopK int
	// MinP 0 disables min-p.
	MinP float64
	// StopTokenIDs end generation in addition to the model's EOS ids.
	StopTokenIDs []int32
	// Seed, when non-nil, seeds the sampler (SGLang sampling_seed, vLLM seed).
	Seed *int64
	// RequestID is echoed by the server and shows in its logs (SGLang rid,
	// vLLM request_id); optional.
	RequestID string
}

// Finish reasons of GenerateResult, normalized over the backends.
const (
	FinishStop   = "stop"   // EOS or a stop token
	FinishLength = "length" // MaxNewTokens reached
	FinishAbort  = "abort"  // aborted by the server (e.g. a weight update)
)

// VersionSpan says that output tokens [Start, End) were sampled under
// weight version Version (SGLang meta_info.weight_versions).
type VersionSpan struct {
	Version    string
	Start, End int
}

// GenerateResult is a completion in token ids.
type GenerateResult struct {
	// OutputIDs are the generated ids, including the matched stop token.
	OutputIDs []int32
	// Logprobs has one sampler log-probability per output id.
	Logprobs []float32
	// FinishReason is FinishStop, FinishLength or FinishAbort.
	FinishReason string
	// MatchedStop is the stop token id that ended generation, -1 if none.
	MatchedStop int32
	// WeightVersion is the server's weight version when the request
	// finished ("" when the backend does not report one).
	WeightVersion string
	// VersionSpans cover OutputIDs when the server reported them (or one
	// span of WeightVersion); empty when no version is known.
	VersionSpans []VersionSpan
	// PromptTokens and CachedTokens are the server's counts (cached:
	// prefix-cache hits), when reported.
	PromptTokens, CachedTokens int
	// Latency is the wall time of the call.
	Latency time.Duration
}

// Policy generates completions from token ids (SGLang /generate, vLLM
// /v1/completions). Implementations are safe for concurrent use.
type Policy interface {
	Generate(ctx context.Context, req GenerateRequest) (GenerateResult, error)
}

func (r GenerateRequest) validate() error {
	if len(r.InputIDs) == 0 {
		return fmt.Errorf("empty input_ids")
	}
	if r.MaxNewTokens <= 0 {
		return fmt.Errorf("max_new_tokens must be > 0, got %d", r.MaxNewTokens)
	}
	if r.Temperature < 0 || r.TopP < 0 || r.TopP > 1 || r.MinP < 0 || r.MinP > 1 {
		return fmt.Errorf("sampling parameters out of range (temperature %g, top_p %g, min_p %g)", r.Temperature, r.TopP, r.MinP)
	}
	for _, id := range r.InputIDs {
		if id < 0 {
			return fmt.Errorf("negative token id %d in input_ids", id)
		}
	}
	return nil
}

func (r GenerateRequest) topP() float64 {
	if r.TopP == 0 {
		return 1
	}
	return r.TopP
}

// topK is TopK on the wire: both SGLang and vLLM disable top-k with -1 (vLLM
// before 0.9 rejects 0 with HTTP 400).
func (r GenerateRequest) topK() int {
	if r.TopK <= 0 {
		return -1
	}
	return r.TopK
}

// PolicyConfig selects and configures the policy backend.
type PolicyConfig struct {
	// Backend is "sglang" (default) or "vllm".
	Backend string `yaml:"backend"`
	// Model is sent as "model" to vLLM (its served model name).
	Model string `yaml:"model"`
	// Endpoints are the inference servers; calls go to the healthy one with
	// the fewest calls in flight. At least one.
	Endpoints []EndpointConfig `yaml:"endpoints"`
	// Health is the passive health tracking that takes failing endpoints
	// out of rotation (zero values: the documented defaults).
	Health HealthConfig `yaml:"health"`
}

// DefaultPolicyConfig is SGLang on its default local port.
func DefaultPolicyConfig() PolicyConfig {
	e := DefaultEndpointConfig()
	e.BaseURL = "http://127.0.0.1:30000"
	return PolicyConfig{Backend: BackendSGLang, Endpoints: []EndpointConfig{e}, Health: DefaultHealthConfig()}
}

// Backend names.
const (
	BackendSGLang = "sglang"
	BackendVLLM   = "vllm"
)

// NewPolicy builds the configured policy client over all endpoints, and the
// weight reloader that matches the backend.
func NewPolicy(cfg PolicyConfig, reg prometheus.Registerer) (Policy, Reloader, error) {
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	if len(cfg.Endpoints) == 0 {
		return nil, nil, fmt.Errorf("llm: policy: no endpoints configured")
	}
	var members []Member
	var reloaders []Reloader
	for _, ec := range cfg.Endpoints {
		ep, err := NewEndpoint(ec, m)
		if err != nil {
			return nil, nil, err
		}
		switch cfg.Backend {
		case BackendSGLang, "":
			members = append(members, Member{Name: ep.Name(), Policy: NewSGLang(ep)})
			reloaders = append(reloaders, NewSGLangReloader(ep, SGLangReloadOptions{}))
		case BackendVLLM:
			members = append(members, Member{Name: ep.Name(), Policy: NewVLLM(ep, cfg.Model)})
			reloaders = append(reloaders, NewVLLMReloader(ep))
		default:
			return nil, nil, fmt.Errorf("llm: policy backend %q: want %q or %q", cfg.Backend, BackendSGLang, BackendVLLM)
		}
	}
	var reloader Reloader = MultiReloader(reloaders)
	if len(reloaders) == 1 {
		reloader = reloaders[0]
	}
	// A single endpoint is wrapped too, so that its health shows in the
	// metrics; with nothing to fail over to, its calls still go to it.
	return NewBalancedPool(cfg.Health, m, members...), reloader, nil
}
