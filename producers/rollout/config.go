package rollout

import (
	"errors"
	"fmt"
	"time"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/tau2/episode"
	"tau2rl/producers/shaping"
)

// Policy modes.
const (
	// ModeToken drives SGLang/vLLM with token ids and records every token.
	ModeToken = "token"
	// ModeChat drives an OpenAI-compatible chat API (baselines, hosted
	// models); nothing is recorded per token, so it is for evaluation only.
	ModeChat = "chat"
)

// PolicyConfig says how the policy (the agent) is called.
type PolicyConfig struct {
	// Mode is "token" (default) or "chat".
	Mode string `yaml:"mode"`
	// Name is the model name recorded in trajectories (agent_model).
	// Default "policy".
	Name string `yaml:"name"`
	// Backend is the token-mode server: "sglang" (default, POST /generate)
	// or "vllm" (POST /v1/completions).
	Backend string `yaml:"backend"`
	// Model is vLLM's served model name, sent as "model" with every
	// request; required with backend vllm (not guessed from /v1/models,
	// which also lists LoRA adapters).
	Model string `yaml:"model"`
	// Endpoints are the token-mode inference servers (data-parallel;
	// calls go to the least busy). Each is a base URL or a mapping of
	// llm.EndpointConfig keys (base_url, max_concurrency,
	// request_timeout, max_retries, …). Default [http://127.0.0.1:30000].
	Endpoints []Endpoint `yaml:"endpoints"`
	// Health is the passive health tracking that takes failing endpoints
	// out of rotation (llm.HealthConfig; default llm.DefaultHealthConfig).
	Health llm.HealthConfig `yaml:"health"`
	// Tokenizer is the Qwen3 tokenizer.json; empty finds
	// $QWEN3_TOKENIZER_DIR or ../shared/qwen3-tokenizer.
	Tokenizer string `yaml:"tokenizer"`
	// History is the token-mode history mode: "incremental" (default,
	// token-exact) or "rerender" (AReaL's behaviour).
	History string `yaml:"history"`
	// EnableThinking false renders Qwen3's empty think block (thinking
	// off); unset leaves thinking on, as AReaL's agent does.
	EnableThinking *bool `yaml:"enable_thinking"`
	// EngineMaxTokens bounds prompt + completion of one call. Default
	// 16384 (AReaL τ² 1.7B).
	EngineMaxTokens int `yaml:"engine_max_tokens"`
	// MaxNewTokens is the completion budget when a request sets none.
	// Default 8192 (AReaL).
	MaxNewTokens int `yaml:"max_new_tokens"`
	// SendSeed passes each trial's seed to the sampler. Default false.
	SendSeed bool `yaml:"send_seed"`
	// Chat is the chat-mode endpoint and model.
	Chat llm.ChatConfig `yaml:"chat"`
	// ChatArgs are extra body fields of chat-mode requests.
	ChatArgs map[string]any `yaml:"chat_args"`
}

// JudgeConfig configures the NL-assertion judge (retail at τ² HEAD). An
// empty base URL means no judge: episodes whose reward needs it are
// infrastructure errors (never rewards).
type JudgeConfig struct {
	Chat llm.ChatConfig `yaml:"chat"`
}

// RunnerConfig is what an episode runner is built from (shared by
// tau2-producer and tau2-eval run).
type RunnerConfig struct {
	// Econfig is AReaL's environment configuration.
	Econfig episode.Config `yaml:"econfig"`
	// DataDir is the τ² data directory (default TAU2_DATA_DIR or
	// ../shared/tau2-data).
	DataDir string `yaml:"data_dir"`
	// Policy is the agent.
	Policy PolicyConfig `yaml:"policy"`
	// UserEndpoint tunes the user simulator's endpoint (concurrency,
	// timeouts, retries, api_key); its base_url is econfig.user_llm_base_url.
	UserEndpoint llm.EndpointConfig `yaml:"user_endpoint"`
	// Judge is the NL-assertion judge.
	Judge JudgeConfig `yaml:"judge"`
	// GraderPool is how many evaluator instances (each caching gold
	// states) are kept per domain. Default 8.
	GraderPool int `yaml:"grader_pool"`
}

// DefaultRunnerConfig returns the documented defaults.
func DefaultRunnerConfig() RunnerConfig {
	ue := llm.DefaultEndpointConfig()
	ue.RequestTimeout = 120 * time.Second // AReaL's user client
	return RunnerConfig{
		Econfig: episode.DefaultConfig(),
		Policy: PolicyConfig{
			Mode: ModeToken, Name: "policy", Backend: llm.BackendSGLang,
			Endpoints: []Endpoint{{EndpointConfig: withURL(llm.DefaultEndpointConfig(), "http://127.0.0.1:30000")}},
			Health:    llm.DefaultHealthConfig(),
			History:   string(chattemplate.ModeIncremental), EngineMaxTokens: 16384, MaxNewTokens: 8192,
			Chat: llm.DefaultChatConfig(),
		},
		UserEndpoint: ue,
		Judge:        JudgeConfig{Chat: llm.DefaultChatConfig()},
		GraderPool:   8,
	}
}

// Validate reports configuration errors.
func (c *RunnerConfig) Validate() error {
	var errs []error
	if err := c.Econfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := (shaping.Config{TurnDiscount: c.Econfig.TurnDiscount, InvalidFormatPenalty: c.Econfig.InvalidFormatPenalty}).Validate(); err != nil {
		errs = append(errs, err)
	}
	switch c.Policy.Mode {
	case ModeToken:
		if _, err := chattemplate.ParseMode(c.Policy.History); err != nil {
			errs = append(errs, fmt.Errorf("policy.history: %w", err))
		}
		if c.Policy.EngineMaxTokens < 1 || c.Policy.MaxNewTokens < 1 {
			errs = append(errs, errors.New("policy.engine_max_tokens and policy.max_new_tokens must be ≥ 1"))
		}
		if len(c.Policy.Endpoints) == 0 {
			errs = append(errs, errors.New("policy.endpoints: at least one inference server"))
		}
		if c.Policy.Backend != llm.BackendSGLang && c.Policy.Backend != llm.BackendVLLM {
			errs = append(errs, fmt.Errorf("policy.backend: %q is not sglang or vllm", c.Policy.Backend))
		}
		if c.Policy.Backend == llm.BackendVLLM && c.Policy.Model == "" {
			// Not guessed from /v1/models: with LoRA adapters it lists several models.
			errs = append(errs, errors.New("policy.model: required with policy.backend=vllm (the served model name, vllm serve --served-model-name)"))
		}
	case ModeChat:
		if c.Policy.Chat.Endpoint.BaseURL == "" {
			errs = append(errs, errors.New("policy.chat.endpoint.base_url: required in chat mode"))
		}
	default:
		errs = append(errs, fmt.Errorf("policy.mode: %q is not token or chat", c.Policy.Mode))
	}
	if c.GraderPool < 1 {
		errs = append(errs, fmt.Errorf("grader_pool: %d must be ≥ 1", c.GraderPool))
	}
	return errors.Join(errs...)
}

// Config is the rollout service's configuration (tau2-producer in mode
// tau2).
type Config struct {
	RunnerConfig `yaml:",inline"`
	// ConsumerGroup shares rollout requests between producers. Default
	// "producers".
	ConsumerGroup string `yaml:"consumer_group"`
	// MaxConcurrentEpisodes bounds the episodes running in this process
	// (a request's whole group is admitted at once). Default 1024.
	MaxConcurrentEpisodes int `yaml:"concurrency"`
	// MaxHeadOffpolicyness drops requests issued more than this many
	// policy versions before the latest known one (AReaL's
	// max_head_offpolicyness); requests also carry stale_after_version.
	// -1 disables the check. Default 2.
	MaxHeadOffpolicyness int64 `yaml:"max_head_offpolicyness"`
	// ShutdownGrace is how long in-flight episodes may run after SIGTERM;
	// groups not finished by then are handed back (not committed, so
	// redelivered). Default 60s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// Episodes stops taking requests once this many episodes have been
	// started, finishes them and exits; 0 runs until stopped. Default 0.
	Episodes int `yaml:"episodes"`
	// PublishInfraTrajectories also publishes infrastructure failures as
	// trajectories with status infra_error on the trajectories topic (the
	// trainer closes their admission slot, the archiver keeps them; no
	// reward is read from them). They always go to the infra-errors topic.
	// Default true.
	PublishInfraTrajectories bool `yaml:"publish_infra_trajectories"`
	// Tags are added to every trajectory.
	Tags map[string]string `yaml:"tags"`
	// SelfDriven makes the producer issue its own requests (a task list × trials) and exit when
	// they are done, instead of reading the rollout-requests topic.
	SelfDriven SelfDrivenConfig `yaml:"self_driven"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		RunnerConfig:             DefaultRunnerConfig(),
		ConsumerGroup:            "producers",
		MaxConcurrentEpisodes:    1024,
		MaxHeadOffpolicyness:     2,
		ShutdownGrace:            60 * time.Second,
		PublishInfraTrajectories: true,
		SelfDriven:               DefaultSelfDrivenConfig(),
	}
}

// Validate reports configuration errors.
func (c *Config) Validate() error {
	var errs []error
	if err := c.RunnerConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Policy.Mode != ModeToken {
		errs = append(errs, errors.New("policy.mode: the producer needs token mode (chat mode records no tokens; use tau2-eval run)"))
	}
	if c.ConsumerGroup == "" {
		errs = append(errs, errors.New("consumer_group: required"))
	}
	if c.MaxConcurrentEpisodes < 1 {
		errs = append(errs, fmt.Errorf("concurrency: %d must be ≥ 1", c.MaxConcurrentEpisodes))
	}
	if c.MaxHeadOffpolicyness < -1 {
		errs = append(errs, fmt.Errorf("max_head_offpolicyness: %d must be ≥ -1", c.MaxHeadOffpolicyness))
	}
	if c.ShutdownGrace < 0 || c.Episodes < 0 {
		errs = append(errs, errors.New("shutdown_grace and episodes must be ≥ 0"))
	}
	if err := c.SelfDriven.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("producer config: %w", errors.Join(errs...))
	}
	return nil
}

// Endpoint is an llm.EndpointConfig that may also be written as just its
// base URL (policy.endpoints=[http://host:30000]). Its UnmarshalYAML is
// llm.EndpointConfig's (promoted): a list element starts from
// llm.DefaultEndpointConfig and takes the keys its mapping names.
type Endpoint struct {
	llm.EndpointConfig `yaml:",inline"`
}

// MarshalYAML prints the endpoint's fields (--print-config): without it the YAML encoder sees the
// inline llm.EndpointConfig's UnmarshalYAML and prints an empty mapping.
func (e Endpoint) MarshalYAML() (any, error) { return e.EndpointConfig, nil }

func withURL(c llm.EndpointConfig, url string) llm.EndpointConfig {
	c.BaseURL = url
	return c
}

// PolicyServer returns the llm.PolicyConfig of the token-mode endpoints.
func (p *PolicyConfig) PolicyServer() llm.PolicyConfig {
	out := llm.PolicyConfig{Backend: p.Backend, Model: p.Model, Health: p.Health}
	for _, e := range p.Endpoints {
		out.Endpoints = append(out.Endpoints, e.EndpointConfig)
	}
	return out
}
