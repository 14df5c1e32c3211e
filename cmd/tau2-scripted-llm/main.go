// Command tau2-scripted-llm serves the SCRIPTED policy and user simulator
// (lib/inference/scripted behind lib/inference/llmtest's OpenAI-compatible server) on
// an address, for `make run` and local development without a GPU. It speaks
// SGLang's /generate, vLLM's /v1/completions and OpenAI chat completions,
// and accepts weight reloads (it only records the version). It is not a
// model: the agent plays each task's gold actions with injected errors.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/scripted"
	"tau2rl/lib/loopback"
	"tau2rl/tau2/episode"
)

const usage = `tau2-scripted-llm — SCRIPTED stand-in for the policy and the user simulator (tau2rl dev tool)

Serves on addr: POST /generate (SGLang, token ids), POST /v1/completions (vLLM, token ids),
POST /v1/chat/completions (OpenAI chat with tools), weight-reload endpoints and /health. Requests
must carry tau2-producer's episode tag (rid / request_id / user), from which the script finds the
τ² task: the agent plays the task's gold actions (with agent_error_rate errors: wrong argument,
skipped write, malformed tool call) and the user states the scenario and ends with ###STOP###.

Example:
  tau2-scripted-llm addr=127.0.0.1:30000 agent_error_rate=0.3
  tau2-producer policy.endpoints=[http://127.0.0.1:30000] user_llm_base_url=http://127.0.0.1:30000/v1`

// Config is tau2-scripted-llm's configuration.
type Config struct {
	// Addr is the listen address; loopback only (the server has no
	// authentication). Default 127.0.0.1:30000 (SGLang's port).
	Addr string `yaml:"addr"`
	// AgentErrorRate is the probability that an episode gets one agent
	// error. Default 0.3.
	AgentErrorRate float64 `yaml:"agent_error_rate"`
	// ErrorKinds are the errors to choose from (wrong_argument,
	// skipped_write, malformed_call). Default all three.
	ErrorKinds []string `yaml:"error_kinds"`
	// Seed varies the error choices. Default 1.
	Seed uint64 `yaml:"seed"`
	// MaxUserTurns ends conversations from the user's side. Default 30.
	MaxUserTurns int `yaml:"max_user_turns"`
	// Domain, when set, loads that domain's tasks at start (so the first
	// requests do not wait for it). Default "".
	Domain string `yaml:"domain"`
	// DataDir is the τ² data directory (default TAU2_DATA_DIR or
	// ../shared/tau2-data).
	DataDir string `yaml:"data_dir"`
	// Tokenizer is the Qwen3 tokenizer.json (default QWEN3_TOKENIZER_DIR or
	// ../shared/qwen3-tokenizer).
	Tokenizer string `yaml:"tokenizer"`
	// Model is the served model name. Default "scripted-qwen3".
	Model string `yaml:"model"`
	// Latency delays every request (to mimic a real server). Default 0.
	Latency time.Duration `yaml:"latency"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	d := scripted.DefaultConfig()
	return Config{Addr: "127.0.0.1:30000", AgentErrorRate: d.ErrorRate, ErrorKinds: d.ErrorKinds, Seed: d.Seed,
		MaxUserTurns: d.MaxUserTurns, Model: "scripted-qwen3"}
}

// scriptConfig is the lib/inference/scripted configuration the flags describe.
func (c *Config) scriptConfig() scripted.Config {
	sc := scripted.DefaultConfig()
	sc.DataDir, sc.ErrorRate, sc.ErrorKinds, sc.Seed, sc.MaxUserTurns = c.DataDir, c.AgentErrorRate, c.ErrorKinds, c.Seed, c.MaxUserTurns
	return sc
}

// Validate checks the configuration before the server starts (cli calls it: exit status 2). The
// server has no authentication — its weight-update endpoints change what it reports for anyone
// who can reach them — so, like tau2-broker, it listens on loopback only.
func (c *Config) Validate() error {
	var errs []error
	if _, err := loopback.Port(c.Addr); err != nil {
		errs = append(errs, err)
	}
	sc := c.scriptConfig()
	if err := sc.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Latency < 0 {
		errs = append(errs, fmt.Errorf("latency: %v must be ≥ 0", c.Latency))
	}
	if c.Model == "" {
		errs = append(errs, errors.New("model: required (the served model name clients send)"))
	}
	return errors.Join(errs...)
}

func main() {
	cfg := DefaultConfig()
	cli.Main(cli.App{Name: "tau2-scripted-llm", Usage: usage, MetricsAddr: "127.0.0.1:9409"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return run(ctx, &cfg, rt)
	})
}

func run(ctx context.Context, cfg *Config, rt *cli.Runtime) error {
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	script, err := scripted.New(cfg.scriptConfig())
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if cfg.Domain != "" {
		set, err := episode.LoadTasks(cfg.DataDir, cfg.Domain, "")
		if err != nil {
			return err
		}
		rt.Log.Info("tasks loaded", "domain", cfg.Domain, "tasks", len(set.Tasks))
	}
	tok, err := episode.LoadTokenizer(cfg.Tokenizer)
	if err != nil {
		return err
	}
	srv, err := llmtest.NewServer(tok, script, llmtest.WithAddr(cfg.Addr), llmtest.WithModel(cfg.Model),
		llmtest.WithLogger(rt.Log.With("component", "scripted-llm")))
	if err != nil {
		return err
	}
	if cfg.Latency > 0 {
		srv.SetLatency(cfg.Latency)
	}
	rt.Log.Info("SCRIPTED LLM serving: gold-action agent and scenario user (not a model)", "url", srv.URL,
		"agent_error_rate", cfg.AgentErrorRate, slog.Any("error_kinds", cfg.ErrorKinds))
	rt.Ready()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("scripted-llm: shutdown: %w", err)
	}
	return nil
}
