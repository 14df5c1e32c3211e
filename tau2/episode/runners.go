package episode

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/required"
	"tau2rl/tau2/env"
	"tau2rl/tau2/evaluator"
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

// RunnerConfig is what an episode runner is built from: the policy, the user simulator, the
// judge and the graders. It is shared by tau2-producer (producers/rollout embeds it) and
// tau2-eval run, which need no Kafka; reward shaping is the producer's and is validated there.
type RunnerConfig struct {
	// Econfig is AReaL's environment configuration.
	Econfig Config `yaml:"econfig"`
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
		Econfig: DefaultConfig(),
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
			errs = append(errs, fmt.Errorf("policy.model: %w with policy.backend=vllm (the served model name, vllm serve --served-model-name)", required.ErrMissing))
		}
	case ModeChat:
		if c.Policy.Chat.Endpoint.BaseURL == "" {
			errs = append(errs, fmt.Errorf("policy.chat.endpoint.base_url: %w in chat mode", required.ErrMissing))
		}
	default:
		errs = append(errs, fmt.Errorf("policy.mode: %q is not token or chat", c.Policy.Mode))
	}
	if c.GraderPool < 1 {
		errs = append(errs, fmt.Errorf("grader_pool: %d must be ≥ 1", c.GraderPool))
	}
	return errors.Join(errs...)
}

// Runners builds and caches one Runner per domain, all sharing the
// LLM clients (so per-endpoint concurrency limits and connection pools are
// process-wide).
type Runners struct {
	cfg    RunnerConfig
	agents AgentFactory
	users  UserFactory
	judge  evaluator.Judge
	userM  string

	mu       sync.Mutex
	byDomain map[string]*Runner
}

// LoadTokenizer loads the Qwen3 tokenizer from path, or from
// $QWEN3_TOKENIZER_DIR / ../shared/qwen3-tokenizer when path is empty.
func LoadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if path == "" {
		dir, err := tokenizer.LocateQwen3()
		if err != nil {
			return nil, fmt.Errorf("episode: no Qwen3 tokenizer: set policy.tokenizer to its tokenizer.json, or $%s to its directory: %w", tokenizer.EnvDir, err)
		}
		path = filepath.Join(dir, "tokenizer.json")
	}
	t, err := tokenizer.Load(path)
	if err != nil {
		return nil, fmt.Errorf("episode: tokenizer %s: %w", path, err)
	}
	return t, nil
}

// NewRunners builds the LLM clients of cfg. version returns the producer's
// current policy version (for tokens whose server version is unknown).
func NewRunners(cfg RunnerConfig, version func() int64, reg prometheus.Registerer) (*Runners, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckRetrieval(cfg.DataDir, cfg.Econfig.Domain, cfg.Econfig.RetrievalConfig); err != nil {
		return nil, fmt.Errorf("episode: econfig.%w", err)
	}
	m, err := llm.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	r := &Runners{cfg: cfg, byDomain: map[string]*Runner{}}
	switch cfg.Policy.Mode {
	case ModeToken:
		pol, _, err := llm.NewPolicy(cfg.Policy.PolicyServer(), reg)
		if err != nil {
			return nil, err
		}
		tok, err := LoadTokenizer(cfg.Policy.Tokenizer)
		if err != nil {
			return nil, err
		}
		mode, _ := chattemplate.ParseMode(cfg.Policy.History)
		r.agents = &TokenAgentFactory{Policy: pol, Tokenizer: tok, Mode: mode, EnableThinking: cfg.Policy.EnableThinking,
			EngineMaxTokens: cfg.Policy.EngineMaxTokens, DefaultMaxTokens: cfg.Policy.MaxNewTokens, Version: version,
			SendSeed: cfg.Policy.SendSeed}
	case ModeChat:
		c, err := llm.NewChat(cfg.Policy.Chat, m)
		if err != nil {
			return nil, err
		}
		r.agents = &ChatAgentFactory{Chat: c, Model: cfg.Policy.Chat.Model, Args: maps.Clone(cfg.Policy.ChatArgs), SendSeed: cfg.Policy.SendSeed}
	}
	if !cfg.Econfig.SoloMode {
		ep := cfg.UserEndpoint
		ep.BaseURL = cfg.Econfig.UserLLMBaseURL
		if ep.Name == "" {
			ep.Name = "user-simulator"
		}
		c, err := llm.NewChat(llm.ChatConfig{Endpoint: ep, Model: cfg.Econfig.UserLLM}, m)
		if err != nil {
			return nil, fmt.Errorf("episode: user simulator: %w", err)
		}
		r.users = &ChatUserFactory{Chat: c, Model: cfg.Econfig.UserLLM, Args: maps.Clone(cfg.Econfig.UserLLMArgs), SendSeed: true}
		r.userM = cfg.Econfig.UserLLM
	}
	if cfg.Judge.Chat.Endpoint.BaseURL != "" {
		j, err := evaluator.NewChatJudge(cfg.Judge.Chat, m)
		if err != nil {
			return nil, err
		}
		r.judge = j
	}
	return r, nil
}

// CheckRetrieval reports a retrieval_config the domain's environment refuses (an unknown name, or
// terminal_use without its sandbox installed) by building the environment once, as every episode
// will: a producer refuses to start on it instead of failing each episode as an infrastructure
// error. An empty retrieval_config or domain checks nothing.
func CheckRetrieval(dataDir, domain, retrieval string) error {
	if retrieval == "" || domain == "" {
		return nil
	}
	if _, err := env.New(domain, env.Options{DataDir: dataDir, Retrieval: retrieval}); err != nil {
		return fmt.Errorf("retrieval_config %q: %w", retrieval, err)
	}
	return nil
}

// For returns the runner of a domain ("" = econfig.domain).
func (r *Runners) For(domain string) (*Runner, error) {
	if domain == "" {
		domain = r.cfg.Econfig.Domain
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if run, ok := r.byDomain[domain]; ok {
		return run, nil
	}
	ec := r.cfg.Econfig
	ec.Domain = domain
	if err := ec.Validate(); err != nil {
		return nil, err
	}
	g, err := NewTauGrader(evaluator.Options{Domain: domain, DataDir: r.cfg.DataDir, Solo: ec.SoloMode, Judge: r.judge}, r.cfg.GraderPool)
	if err != nil {
		return nil, fmt.Errorf("episode: grader for %s: %w", domain, err)
	}
	run := &Runner{Config: ec, DataDir: r.cfg.DataDir, Agents: r.agents, Users: r.users, Grader: g,
		AgentModel: r.cfg.Policy.Name, UserModel: r.userM}
	r.byDomain[domain] = run
	return run, nil
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
