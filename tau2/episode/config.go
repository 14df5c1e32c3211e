package episode

import (
	"errors"
	"fmt"
	"time"

	"tau2rl/lib/required"
)

// Config is AReaL's τ² environment configuration (examples/tau2/utils.py,
// Tau2EnvConfig: the `econfig:` block, same key names and defaults) plus the
// τ² orchestrator settings AReaL leaves at τ²'s values (max_errors) and the
// per-episode timeout of AReaL's agent workflow.
type Config struct {
	// Domain is the τ² domain: airline, retail, telecom, telecom-workflow or
	// mock. Default "telecom" (AReaL's default).
	Domain string `yaml:"domain"`
	// MaxSteps is τ²'s step budget: every agent, user and environment hop
	// counts. Default 100 (AReaL's default; its shipped configs use 50,
	// τ²'s runners 200).
	MaxSteps int `yaml:"max_steps"`
	// MaxErrors ends the episode (too_many_errors) once this many tool calls
	// have failed, cumulatively. Default 10 (τ²).
	MaxErrors int `yaml:"max_errors"`
	// AddThinkingTool gives the agent AReaL's no-op think(thoughts) tool.
	// Default false.
	AddThinkingTool bool `yaml:"add_thinking_tool"`
	// SoloMode runs τ²'s no-user mode (telecom, mock only): the agent gets
	// the user's tools and a done() tool, and no user simulator runs.
	// Default false.
	SoloMode bool `yaml:"solo_mode"`
	// RetrievalConfig is banking_knowledge's retrieval configuration (τ²'s
	// --retrieval-config: no_knowledge, full_kb, golden_retrieval,
	// grep_only, bm25, bm25_grep); empty = the domain's default (bm25).
	// Other domains ignore it. See docs/TAU2.md §11.
	RetrievalConfig string `yaml:"retrieval_config"`
	// EmbeddingsURL and EmbeddingsModel configure the dense retrieval
	// configurations (openai_embeddings[_grep]); see env.Options.
	EmbeddingsURL   string `yaml:"embeddings_url"`
	EmbeddingsModel string `yaml:"embeddings_model"`
	// UserLLMBaseURL is the OpenAI-compatible base URL of the user
	// simulator (e.g. http://host:8000/v1). Required unless solo_mode.
	UserLLMBaseURL string `yaml:"user_llm_base_url"`
	// UserLLM is the user simulator's model name. Default
	// "gpt-4.1-2025-04-14" (τ²'s default).
	UserLLM string `yaml:"user_llm"`
	// UserLLMArgs are extra body fields of every user-simulator request
	// (temperature, top_p, max_tokens, seed, chat_template_kwargs, …).
	// Default {temperature: 0.0} (τ²'s default); top_p 1.0 is added when
	// absent, as AReaL does.
	UserLLMArgs map[string]any `yaml:"user_llm_args"`
	// TurnDiscount γ gives policy call i of N the reward γ^(N−1−i)·R.
	// Default 1.0 (every call carries the episode reward). See
	// producers/shaping.
	TurnDiscount float64 `yaml:"turn_discount"`
	// InvalidFormatPenalty is subtracted from the episode reward per
	// invalid-format policy turn. Default 0.1. See producers/shaping.
	InvalidFormatPenalty float64 `yaml:"invalid_format_penalty"`
	// Timeout bounds one episode's wall time, grading included; an episode
	// that runs out is an infrastructure error. Default 600s (AReaL).
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultUserLLM is τ²'s default user-simulator model.
const DefaultUserLLM = "gpt-4.1-2025-04-14"

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Domain:               "telecom",
		MaxSteps:             100,
		MaxErrors:            10,
		UserLLM:              DefaultUserLLM,
		UserLLMArgs:          map[string]any{"temperature": 0.0},
		TurnDiscount:         1.0,
		InvalidFormatPenalty: 0.1,
		Timeout:              600 * time.Second,
	}
}

// Validate reports configuration errors, naming the YAML keys.
func (c *Config) Validate() error {
	var errs []error
	if c.Domain == "" {
		errs = append(errs, fmt.Errorf("domain: %w", required.ErrMissing))
	}
	if c.MaxSteps < 1 {
		errs = append(errs, fmt.Errorf("max_steps: %d must be ≥ 1", c.MaxSteps))
	}
	if c.MaxErrors < 1 {
		errs = append(errs, fmt.Errorf("max_errors: %d must be ≥ 1", c.MaxErrors))
	}
	if !c.SoloMode && c.UserLLMBaseURL == "" {
		errs = append(errs, fmt.Errorf("user_llm_base_url: %w unless solo_mode (the user simulator's OpenAI-compatible URL)", required.ErrMissing))
	}
	if c.SoloMode && c.Domain != "telecom" && c.Domain != "telecom-workflow" && c.Domain != "mock" {
		errs = append(errs, fmt.Errorf("solo_mode: domain %s does not support solo mode (telecom, telecom-workflow and mock do)", c.Domain))
	}
	if c.TurnDiscount <= 0 || c.TurnDiscount > 1 {
		errs = append(errs, fmt.Errorf("turn_discount: %v must be in (0, 1]", c.TurnDiscount))
	}
	if c.InvalidFormatPenalty < 0 {
		errs = append(errs, fmt.Errorf("invalid_format_penalty: %v must be ≥ 0", c.InvalidFormatPenalty))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout: %s must be positive", c.Timeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("econfig: %w", errors.Join(errs...))
	}
	return nil
}
