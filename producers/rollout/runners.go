package rollout

import (
	"fmt"
	"maps"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/tau2/episode"
	"tau2rl/lib/tau2/evaluator"
	"tau2rl/producers/shaping"
)

// Runners builds and caches one episode.Runner per domain, all sharing the
// LLM clients (so per-endpoint concurrency limits and connection pools are
// process-wide).
type Runners struct {
	cfg    RunnerConfig
	agents episode.AgentFactory
	users  episode.UserFactory
	judge  evaluator.Judge
	userM  string

	mu       sync.Mutex
	byDomain map[string]*episode.Runner
}

// LoadTokenizer loads the Qwen3 tokenizer from path, or from
// $QWEN3_TOKENIZER_DIR / ../shared/qwen3-tokenizer when path is empty.
func LoadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if path == "" {
		dir, err := tokenizer.LocateQwen3()
		if err != nil {
			return nil, fmt.Errorf("rollout: no Qwen3 tokenizer: set policy.tokenizer to its tokenizer.json, or $%s to its directory: %w", tokenizer.EnvDir, err)
		}
		path = filepath.Join(dir, "tokenizer.json")
	}
	t, err := tokenizer.Load(path)
	if err != nil {
		return nil, fmt.Errorf("rollout: tokenizer %s: %w", path, err)
	}
	return t, nil
}

// NewRunners builds the LLM clients of cfg. version returns the producer's
// current policy version (for tokens whose server version is unknown).
func NewRunners(cfg RunnerConfig, version func() int64, reg prometheus.Registerer) (*Runners, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := llm.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	r := &Runners{cfg: cfg, byDomain: map[string]*episode.Runner{}}
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
		r.agents = &episode.TokenAgentFactory{Policy: pol, Tokenizer: tok, Mode: mode, EnableThinking: cfg.Policy.EnableThinking,
			EngineMaxTokens: cfg.Policy.EngineMaxTokens, DefaultMaxTokens: cfg.Policy.MaxNewTokens, Version: version,
			SendSeed: cfg.Policy.SendSeed}
	case ModeChat:
		c, err := llm.NewChat(cfg.Policy.Chat, m)
		if err != nil {
			return nil, err
		}
		r.agents = &episode.ChatAgentFactory{Chat: c, Model: cfg.Policy.Chat.Model, Args: maps.Clone(cfg.Policy.ChatArgs), SendSeed: cfg.Policy.SendSeed}
	}
	if !cfg.Econfig.SoloMode {
		ep := cfg.UserEndpoint
		ep.BaseURL = cfg.Econfig.UserLLMBaseURL
		if ep.Name == "" {
			ep.Name = "user-simulator"
		}
		c, err := llm.NewChat(llm.ChatConfig{Endpoint: ep, Model: cfg.Econfig.UserLLM}, m)
		if err != nil {
			return nil, fmt.Errorf("rollout: user simulator: %w", err)
		}
		r.users = &episode.ChatUserFactory{Chat: c, Model: cfg.Econfig.UserLLM, Args: maps.Clone(cfg.Econfig.UserLLMArgs), SendSeed: true}
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

// Shaping returns the reward-shaping knobs of econfig.
func (r *Runners) Shaping() shaping.Config {
	return shaping.Config{TurnDiscount: r.cfg.Econfig.TurnDiscount, InvalidFormatPenalty: r.cfg.Econfig.InvalidFormatPenalty}
}

// For returns the runner of a domain ("" = econfig.domain).
func (r *Runners) For(domain string) (*episode.Runner, error) {
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
	g, err := episode.NewTauGrader(evaluator.Options{Domain: domain, DataDir: r.cfg.DataDir, Solo: ec.SoloMode, Judge: r.judge}, r.cfg.GraderPool)
	if err != nil {
		return nil, fmt.Errorf("rollout: grader for %s: %w", domain, err)
	}
	run := &episode.Runner{Config: ec, DataDir: r.cfg.DataDir, Agents: r.agents, Users: r.users, Grader: g,
		AgentModel: r.cfg.Policy.Name, UserModel: r.userM}
	r.byDomain[domain] = run
	return run, nil
}
