// Command tau2-run runs the whole tau2rl pipeline on one machine, for `make run`
// and for a first look: the embedded Kafka broker (tau2-broker), the scripted
// OpenAI-compatible LLM server (tau2-scripted-llm, standing in for SGLang and the
// user simulator), the archiver, the trainer and the producer, each as its own
// process exactly as they run in production. It prints progress while they work
// and a summary at the end, then stops them with SIGTERM, as systemd would.
//
// It is a development tool: production runs each binary under systemd against a
// real Kafka cluster (see deploy/ and docs/OPERATIONS.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
)

const usage = `tau2-run — run the whole tau2rl pipeline locally (what 'make run' does)

Starts tau2-broker (embedded Kafka on loopback), tau2-scripted-llm (a scripted
OpenAI-compatible server that plays the policy from each task's gold actions with
errors, and the user from the task's scenario), tau2-archiver, tau2-trainer and
tau2-producer, shows progress until the trainer has taken 'steps' steps, stops
everything gracefully, and prints a summary of what was produced, archived and
trained. Logs and data go to 'dir' (one sub-directory per run).

Examples:
  tau2-run                          # airline, 2 trainer steps
  tau2-run domain=retail steps=5
  tau2-run bin=bin dir=/tmp/tau2run

The learning experiment (demonstrations → SFT → GRPO → pass^k before/after → figures):
  tau2-run experiment --help`

// Config is tau2-run's configuration.
type Config struct {
	// Bin is the directory holding the built binaries.
	Bin string `yaml:"bin"`
	// Dir is where each run gets a timestamped directory of logs, Kafka data,
	// the Parquet dataset and the trainer's checkpoints.
	Dir string `yaml:"dir"`
	// Domain and Split choose the τ² tasks the trainer requests rollouts for.
	Domain string `yaml:"domain"`
	Split  string `yaml:"split"`
	// Steps is how many trainer steps to run before stopping.
	Steps int `yaml:"steps"`
	// GroupSize is the number of rollouts per task (GRPO group), BatchSize the
	// number of groups per trainer step.
	GroupSize int `yaml:"group_size"`
	BatchSize int `yaml:"batch_size"`
	// Concurrency is how many episodes the producer runs at once.
	Concurrency int `yaml:"concurrency"`
	// AgentErrorRate is how often the scripted policy deviates from the gold
	// actions, so that rewards vary within a group.
	AgentErrorRate float64 `yaml:"agent_error_rate"`
	// DataDir is the τ² data directory ("" = resolved by lib/assets: TAU2_DATA_DIR,
	// ../shared/tau2-data, the cache, a download; docs/ASSETS.md), passed to every role.
	DataDir string `yaml:"data_dir"`
	// ModelConfig is the Hugging Face config.json of the model the trainer
	// starts from (random weights): tiny, but with Qwen3's real vocabulary.
	ModelConfig string `yaml:"model_config"`
	// Timeout bounds the whole run.
	Timeout time.Duration `yaml:"timeout"`
	// Interval is how often progress is printed.
	Interval time.Duration `yaml:"interval"`
}

func defaultConfig() Config {
	return Config{
		Bin: "bin", Dir: "run", Domain: "airline", Split: "train", Steps: 2,
		GroupSize: 4, BatchSize: 2, Concurrency: 32, AgentErrorRate: 0.3,
		ModelConfig: "deploy/models/qwen3-tiny/config.json",
		Timeout:     15 * time.Minute, Interval: 2 * time.Second,
	}
}

// Validate checks the configuration (cli calls it before anything starts: exit status 2).
func (c *Config) Validate() error {
	var errs []error
	if c.Steps < 1 || c.GroupSize < 1 || c.BatchSize < 1 || c.Concurrency < 1 {
		errs = append(errs, errors.New("steps, group_size, batch_size and concurrency must be at least 1"))
	}
	if c.AgentErrorRate < 0 || c.AgentErrorRate > 1 {
		errs = append(errs, fmt.Errorf("agent_error_rate: %v must be in [0, 1]", c.AgentErrorRate))
	}
	if c.Timeout <= 0 || c.Interval <= 0 {
		errs = append(errs, errors.New("timeout and interval must be positive"))
	}
	if c.Bin == "" || c.Dir == "" || c.Domain == "" {
		errs = append(errs, errors.New("bin, dir and domain are required"))
	}
	return errors.Join(errs...)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "experiment" {
		experimentMain(os.Args[2:])
		return
	}
	cfg := defaultConfig()
	cli.Main(cli.App{Name: "tau2-run", Usage: usage, MetricsAddr: "off"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		for _, b := range []string{"tau2-broker", "tau2-scripted-llm", "tau2-archiver", "tau2-trainer", "tau2-producer"} {
			if _, err := os.Stat(filepath.Join(cfg.Bin, b)); err != nil {
				return fmt.Errorf("%s not built in %s (run 'make build'): %w", b, cfg.Bin, err)
			}
		}
		dataDir, err := data.Dir(cfg.DataDir)
		if err != nil {
			return fmt.Errorf("τ² data: %w", err)
		}
		cfg.DataDir = dataDir
		if err := checkDomain(dataDir, cfg.Domain); err != nil {
			return fmt.Errorf("%w: %v", cli.ErrUsage, err)
		}
		// Resolve (and, on a fresh clone, download) the tokenizer once, in the foreground with
		// its progress bar; the roles started below inherit the directory.
		tokDir, err := tokenizer.LocateQwen3()
		if err != nil {
			return fmt.Errorf("Qwen3 tokenizer: %w", err)
		}
		if err := os.Setenv(tokenizer.EnvDir, tokDir); err != nil {
			return err
		}
		if cfg.ModelConfig, err = filepath.Abs(cfg.ModelConfig); err != nil {
			return err
		}
		dir, err := newRunDir(cfg.Dir, time.Now())
		if err != nil {
			return err
		}
		rt.Ready()
		return runPipeline(ctx, cfg, dir)
	})
}

// checkDomain reports a domain the τ² data has no tasks for, naming the domains tau2rl knows
// (env's registry), before any process starts (the scripted server would otherwise fail during
// start-up with a file error).
func checkDomain(dataDir, domain string) error {
	tasks, err := data.TasksPath(dataDir, domain, data.Head)
	if err != nil {
		return err
	}
	if _, err := os.Stat(tasks); err == nil {
		return nil
	}
	return fmt.Errorf("domain %q: the τ² data in %s has no tasks for it (domains: %s)", domain, dataDir, strings.Join(env.Domains(), ", "))
}
