// Command tau2-producer runs τ²-bench episodes for rollout requests and
// publishes scored trajectories to Kafka (mode tau2), or publishes SYNTHETIC
// load (mode synthetic). It is wiring only: the work is in producers/rollout
// (service), tau2/episode (orchestrator) and producers/synthetic.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"tau2rl/cmd/internal/cli"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/producers/rollout"
	"tau2rl/producers/synthetic"
	"tau2rl/tau2/episode"
)

const usage = `tau2-producer — τ²-bench rollout producer (tau2rl)

mode=tau2 (default): joins the consumer group consumer_group on the rollout-requests topic, runs each
request's group of τ² episodes against the policy in token mode (SGLang /generate or vLLM
/v1/completions; prompts rendered with Qwen3's chat template and tokenized here, every token,
log-prob and policy version captured) and the user simulator (any OpenAI-compatible chat API),
grades them with the Go τ² evaluator, shapes the rewards (econfig.invalid_format_penalty,
econfig.turn_discount) and publishes the group; then commits the request. Infrastructure failures
go to the infra-errors topic, never as rewards. Policy versions are followed on the
policy-versions topic; requests staler than max_head_offpolicyness are dropped. SIGTERM stops
taking requests and finishes running groups within shutdown_grace.

self_driven.enabled=true: no trainer needed — the producer issues its own requests, one of
self_driven.trials episodes for each task of self_driven.split (self_driven.domain, default
econfig.domain; self_driven.task_ids, self_driven.limit), publishes them and exits with a summary.
Run an archiver beside it to keep a demonstration dataset (tau2-trainer sft reads it).

mode=synthetic: publishes SYNTHETIC trajectories (load tests only; see synthetic.*).

The econfig.* keys are AReaL's τ² example options, with its defaults.

Examples:
  # SGLang policy + a self-hosted user simulator
  tau2-producer kafka.brokers=[kafka1:9092] policy.endpoints=[http://sglang-0:30000,http://sglang-1:30000] \
      econfig.domain=airline econfig.user_llm_base_url=http://user-llm:8000/v1 econfig.user_llm=Qwen2.5-72B-Instruct
  # vLLM policy, GPT-4.1 as the user simulator
  tau2-producer policy.backend=vllm policy.model=Qwen3-8B policy.endpoints=[http://vllm:8000] \
      econfig.user_llm_base_url=https://api.openai.com/v1 user_endpoint.api_key_env=OPENAI_API_KEY
  # local smoke run beside tau2-broker and tau2-scripted-llm (their default addresses): 4 airline tasks × 4 trials, then exit
  tau2-producer kafka.brokers=[127.0.0.1:9092] policy.endpoints=[http://127.0.0.1:30000] \
      user_llm_base_url=http://127.0.0.1:30000/v1 econfig.domain=airline \
      self_driven.enabled=true self_driven.limit=4 self_driven.trials=4`

// Config is tau2-producer's configuration.
type Config struct {
	// Mode is "tau2" (default) or "synthetic".
	Mode string `yaml:"mode"`
	// Kafka is the transport.
	Kafka tkafka.Config `yaml:"kafka"`
	// UserLLMBaseURL, when set, overrides econfig.user_llm_base_url (a
	// shortcut for scripts).
	UserLLMBaseURL string `yaml:"user_llm_base_url"`
	// Synthetic configures mode synthetic.
	Synthetic synthetic.Config `yaml:"synthetic"`

	rollout.Config `yaml:",inline"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Mode: "tau2", Kafka: tkafka.DefaultConfig(), Synthetic: synthetic.DefaultConfig(), Config: rollout.DefaultConfig()}
}

// Validate checks the whole configuration for the chosen mode (cli calls it before run, so a bad
// value is exit status 2 before any connection).
func (c *Config) Validate() error {
	errs := []error{c.Kafka.Validate()}
	switch c.Mode {
	case "tau2":
		rc := c.Config
		if c.UserLLMBaseURL != "" {
			rc.Econfig.UserLLMBaseURL = c.UserLLMBaseURL
		}
		errs = append(errs, rc.Validate())
	case "synthetic":
		errs = append(errs, c.Synthetic.Validate())
	default:
		errs = append(errs, fmt.Errorf("mode: %q is not tau2 or synthetic", c.Mode))
	}
	return errors.Join(errs...)
}

func main() {
	cfg := DefaultConfig()
	cli.Main(cli.App{Name: "tau2-producer", Usage: usage, MetricsAddr: ":9410"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return run(ctx, &cfg, rt)
	})
}

func run(ctx context.Context, cfg *Config, rt *cli.Runtime) error {
	if cfg.UserLLMBaseURL != "" {
		cfg.Econfig.UserLLMBaseURL = cfg.UserLLMBaseURL
	}
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	km, err := tkafka.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	if cfg.Mode == "synthetic" {
		return runSynthetic(ctx, cfg, rt, km)
	}
	m, err := rollout.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	vs := &rollout.Versions{}
	runners, err := episode.NewRunners(cfg.RunnerConfig, vs.Latest, rt.Registry)
	if err != nil {
		return err
	}
	group := cfg.ConsumerGroup
	if cfg.SelfDriven.Enabled {
		group = "" // requests are made here: do not join the producers' group
	}
	kio, err := rollout.OpenKafka(ctx, cfg.Kafka, group, km)
	if err != nil {
		return err
	}
	defer kio.Close()
	deps := kio.Deps(rollout.Deps{Runners: runners, Versions: vs, Metrics: m, Log: rt.Log}, cfg.Kafka)
	var list *rollout.RequestList
	if cfg.SelfDriven.Enabled {
		dataDir := cfg.DataDir
		list, err = rollout.NewRequestList(cfg.SelfDriven, cfg.Econfig.Domain, func(domain, split string) (*episode.TaskSet, error) {
			return episode.LoadTasks(dataDir, domain, split)
		}, vs.Latest())
		if err != nil {
			return fmt.Errorf("%w: %v", cli.ErrUsage, err)
		}
		deps.Source = list
		rt.Log.Info("self-driven: issuing requests here", "requests", list.Len(), "trials", cfg.SelfDriven.Trials)
	}
	svc, err := rollout.New(cfg.Config, deps)
	if err != nil {
		return err
	}
	vctx, cancelVersions := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := rollout.FollowVersions(vctx, cfg.Kafka, vs, m, km, rt.Log); err != nil {
			rt.Log.Error("policy-version follower stopped", "err", err)
		}
	}()
	rt.Log.Info("producer started", "group", cfg.ConsumerGroup, "policy_backend", cfg.Policy.Backend,
		"endpoints", len(cfg.Policy.Endpoints), "history", cfg.Policy.History, "concurrency", cfg.MaxConcurrentEpisodes,
		"max_head_offpolicyness", cfg.MaxHeadOffpolicyness, "episodes", cfg.Episodes, slog.Any("kafka", cfg.Kafka))
	rt.Ready()
	err = svc.Run(ctx)
	cancelVersions()
	wg.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	if list != nil && err == nil {
		sum := svc.Summary()
		fmt.Fprintf(stdout, "tau2-producer: %d requests, %d episodes, %d groups published, %d infra errors, %d abandoned\n",
			sum.Requests, sum.Episodes, sum.Published, sum.InfraErrors, sum.Abandoned)
		if ctx.Err() == nil && sum.Requests < list.Len() {
			return fmt.Errorf("self-driven: only %d of %d requests ran (see the dead-letter topic)", sum.Requests, list.Len())
		}
	}
	return err
}

// stdout is where the self-driven summary goes (a variable so tests can capture it).
var stdout io.Writer = os.Stdout

func runSynthetic(ctx context.Context, cfg *Config, rt *cli.Runtime, km *tkafka.Metrics) error {
	if err := tkafka.EnsureTopics(ctx, cfg.Kafka, cfg.Kafka.Topics.Trajectories); err != nil {
		return err
	}
	w, err := tkafka.NewWriter(cfg.Kafka, cfg.Kafka.Topics.Trajectories, km)
	if err != nil {
		return err
	}
	defer w.Close()
	rt.Ready()
	_, err = synthetic.Run(ctx, cfg.Synthetic, w, rt.Registry, rt.Log)
	return err
}
