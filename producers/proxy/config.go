package proxy

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"tau2rl/lib/inference/llm"
	"tau2rl/schemas"
)

// Config configures the capture proxy.
type Config struct {
	// Listen is the address of the OpenAI-compatible API and the session
	// API (default ":8000").
	Listen string `yaml:"listen"`
	// Model is the model name served on /v1/models and echoed in responses;
	// a request may name any model (clients hard-code names), the policy is
	// always the one behind the proxy. Also Trajectory.AgentModel.
	Model string `yaml:"model"`
	// Policy is the token-mode policy server pool (SGLang /generate, vLLM
	// /v1/completions; tau2-sampler speaks SGLang's).
	Policy llm.PolicyConfig `yaml:"policy"`
	// Tokenizer is Qwen3's tokenizer.json; empty finds $QWEN3_TOKENIZER_DIR
	// or ../shared/qwen3-tokenizer.
	Tokenizer string `yaml:"tokenizer"`
	// EnableThinking false renders Qwen3's empty think block; nil leaves
	// thinking on. A request may override it with
	// chat_template_kwargs.enable_thinking, as with SGLang and vLLM.
	EnableThinking *bool `yaml:"enable_thinking"`
	// EngineMaxTokens bounds prompt + completion of one call, and so (the
	// history being incremental) the whole token sequence a session trains
	// on. A call whose prompt leaves no room is refused with
	// context_length_exceeded.
	EngineMaxTokens int `yaml:"engine_max_tokens"`
	// TextPartsJoin is how the text parts of a message's content
	// ([{"type":"text","text":…}, …]) are joined for the template, which
	// renders a string: "auto" (the default) as the policy backend's own
	// chat-completions server does for Qwen3's string-content template —
	// SGLang (and tau2-sampler, which speaks its API) with a space, vLLM
	// with a newline — so a prompt trained on is the prompt that engine
	// serves; or "space", "newline", "none" (concatenated).
	TextPartsJoin string `yaml:"text_parts_join"`
	// MaxNewTokens is the completion budget when a request sets neither
	// max_tokens nor max_completion_tokens, and the cap when it does.
	MaxNewTokens int `yaml:"max_new_tokens"`
	// Domain and Split are the trajectories' defaults (a session may name
	// its own domain); both are Parquet partition names.
	Domain string `yaml:"domain"`
	Split  string `yaml:"split"`
	// Auth says where API keys come from.
	Auth AuthConfig `yaml:"auth"`
	// Limits bound sessions and calls.
	Limits Limits `yaml:"limits"`
	// SessionTTL is how long a session may stay idle (no call, no reward)
	// before it expires: an infra-errors record, never a trajectory.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// FinishedTTL is how long finished and expired session ids are
	// remembered, so that late calls and rewards are refused instead of
	// opening a new session under the same id.
	FinishedTTL time.Duration `yaml:"finished_ttl"`
	// HistoryStates is how many recent conversation states (a call's prompt
	// and each returned choice) a session keeps to continue from, token
	// exactly. A request that extends none of them starts a new prefix
	// (template drift).
	HistoryStates int `yaml:"history_states"`
	// ShutdownGrace bounds the wait for calls in flight on shutdown, and for
	// publishing the expiry records of sessions left open.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
}

// AuthConfig says where the proxy's API keys come from. Keys never appear
// in the configuration itself (so --print-config shows none).
type AuthConfig struct {
	// APIKeysEnv names an environment variable holding keys, separated by
	// commas or whitespace.
	APIKeysEnv string `yaml:"api_keys_env"`
	// APIKeysFile names a file holding one key per line ('#' comments).
	APIKeysFile string `yaml:"api_keys_file"`
	// Disabled accepts every request without a key (loopback tests and
	// single-user setups); it must be said explicitly.
	Disabled bool `yaml:"disabled"`
}

// Limits bound what clients can make the proxy hold.
type Limits struct {
	// MaxSessions is the number of open sessions; a call that would open
	// another is refused (429).
	MaxSessions int `yaml:"max_sessions"`
	// MaxCallsPerSession bounds the recorded calls of one session (429).
	MaxCallsPerSession int `yaml:"max_calls_per_session"`
	// MaxSessionConcurrency bounds one session's calls in flight (429).
	MaxSessionConcurrency int `yaml:"max_session_concurrency"`
	// MaxConcurrentCalls bounds generations in flight over all sessions;
	// more wait for a slot.
	MaxConcurrentCalls int `yaml:"max_concurrent_calls"`
	// MaxRequestBytes bounds a request body (413).
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// MaxN bounds a request's n (400).
	MaxN int `yaml:"max_n"`
	// MaxPrefixes bounds the cache of tokenized system prompts.
	MaxPrefixes int `yaml:"max_prefixes"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Listen: ":8000", Model: "qwen3-policy", Policy: llm.DefaultPolicyConfig(),
		EngineMaxTokens: 16384, MaxNewTokens: 8192, TextPartsJoin: "auto", Domain: "proxy", Split: "train",
		Auth: AuthConfig{APIKeysEnv: "TAU2_PROXY_API_KEYS"},
		Limits: Limits{MaxSessions: 4096, MaxCallsPerSession: 512, MaxSessionConcurrency: 8, MaxConcurrentCalls: 1024,
			MaxRequestBytes: 8 << 20, MaxN: 8, MaxPrefixes: 256},
		SessionTTL: 30 * time.Minute, FinishedTTL: time.Hour, HistoryStates: 8, ShutdownGrace: 30 * time.Second,
	}
}

// Validate checks the configuration; every problem is reported.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Listen == "" {
		bad("listen: empty")
	}
	if strings.TrimSpace(c.Model) == "" {
		bad("model: empty")
	}
	if len(c.Policy.Endpoints) == 0 {
		bad("policy.endpoints: at least one policy server is needed")
	}
	if c.Policy.Backend != llm.BackendSGLang && c.Policy.Backend != llm.BackendVLLM {
		bad("policy.backend: %q is not sglang or vllm", c.Policy.Backend)
	}
	if c.EngineMaxTokens < 2 {
		bad("engine_max_tokens: %d, want ≥ 2", c.EngineMaxTokens)
	}
	if _, err := c.textJoin(); err != nil {
		bad("%v", err)
	}
	if c.MaxNewTokens < 1 {
		bad("max_new_tokens: %d, want ≥ 1", c.MaxNewTokens)
	}
	if err := schemas.ValidatePathComponent(c.Domain); err != nil {
		bad("domain: %v", err)
	}
	if err := schemas.ValidatePathComponent(c.Split); err != nil {
		bad("split: %v", err)
	}
	if !c.Auth.Disabled && c.Auth.APIKeysEnv == "" && c.Auth.APIKeysFile == "" {
		bad("auth: set api_keys_env or api_keys_file, or auth.disabled=true")
	}
	l := c.Limits
	for _, f := range []struct {
		name string
		v    int64
	}{{"max_sessions", int64(l.MaxSessions)}, {"max_calls_per_session", int64(l.MaxCallsPerSession)},
		{"max_session_concurrency", int64(l.MaxSessionConcurrency)}, {"max_concurrent_calls", int64(l.MaxConcurrentCalls)},
		{"max_request_bytes", l.MaxRequestBytes}, {"max_n", int64(l.MaxN)}, {"max_prefixes", int64(l.MaxPrefixes)}} {
		if f.v < 1 {
			bad("limits.%s: %d, want ≥ 1", f.name, f.v)
		}
	}
	if c.SessionTTL <= 0 || c.FinishedTTL <= 0 || c.ShutdownGrace <= 0 {
		bad("session_ttl, finished_ttl and shutdown_grace must be > 0 (got %s, %s, %s)", c.SessionTTL, c.FinishedTTL, c.ShutdownGrace)
	}
	if c.HistoryStates < 1 {
		bad("history_states: %d, want ≥ 1", c.HistoryStates)
	}
	return errors.Join(errs...)
}

// LoadAPIKeys reads the keys named by the configuration: the environment
// variable and the file (both when both are set). With auth enabled, no key
// at all is an error: a proxy nobody can call is a misconfiguration.
func (a AuthConfig) LoadAPIKeys() (map[string]bool, error) {
	if a.Disabled {
		return nil, nil
	}
	keys := map[string]bool{}
	if a.APIKeysEnv != "" {
		for _, k := range strings.FieldsFunc(os.Getenv(a.APIKeysEnv), func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
			keys[k] = true
		}
	}
	if a.APIKeysFile != "" {
		b, err := os.ReadFile(a.APIKeysFile)
		if err != nil {
			return nil, fmt.Errorf("proxy: auth.api_keys_file: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k := strings.TrimSpace(line); k != "" && !strings.HasPrefix(k, "#") {
				keys[k] = true
			}
		}
	}
	for k := range keys {
		if strings.ContainsAny(k, ";=") {
			return nil, fmt.Errorf("proxy: an API key contains ';' or '=', which separate session fields in a bearer token")
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("proxy: auth enabled but no API key found in $%s or %q", a.APIKeysEnv, a.APIKeysFile)
	}
	return keys, nil
}

// textJoin resolves TextPartsJoin to the separator.
func (c *Config) textJoin() (string, error) {
	switch c.TextPartsJoin {
	case "auto", "":
		if c.Policy.Backend == llm.BackendVLLM {
			return "\n", nil // vLLM chat_utils._parse_chat_message_content_parts
		}
		return " ", nil // SGLang jinja_template_utils.process_content_for_template_format
	case "space":
		return " ", nil
	case "newline":
		return "\n", nil
	case "none":
		return "", nil
	}
	return "", fmt.Errorf("text_parts_join: %q is not auto, space, newline or none", c.TextPartsJoin)
}
