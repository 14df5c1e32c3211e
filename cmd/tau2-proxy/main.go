// Command tau2-proxy is the capture proxy: an OpenAI-compatible
// chat-completions server in front of token-mode policy servers that
// records every call of every session token-exactly and publishes one
// scored trajectory per finished session to Kafka. It is wiring only: the
// work is in producers/proxy.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"tau2rl/cmd/internal/cli"
	"tau2rl/lib/inference/llm"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/producers/proxy"
	"tau2rl/producers/rollout"
	"tau2rl/tau2/episode"
)

const usage = `tau2-proxy — capture proxy: any OpenAI-API agent becomes a token-exact rollout producer (tau2rl)

Serves OpenAI's POST /v1/chat/completions (tools, tool_choice, stream, n, stop, temperature, top_p,
max_tokens, max_completion_tokens), POST /v1/responses (input items, instructions, function tools,
previous_response_id, store, stream; the Agents SDKs' default) and GET /v1/models on listen. Each call is rendered with Qwen3's
chat template and tokenized here, generated from token ids by the policy servers (SGLang /generate,
vLLM /v1/completions, tau2-sampler), parsed into tool_calls and reasoning_content, and recorded.

Sessions: the bearer token is KEY;session=ID;task=T;group=G;trial=N (or X-Tau2-Session/-Task/-Group
headers). POST /v1/sessions/ID/reward {"reward":1} and POST /v1/sessions/ID/finish publish the
session's trajectory to the trajectories topic; POST /v1/sessions/ID/abort {"error":"…"} and sessions
idle past session_ttl publish an infra-errors record, never a reward. API keys come from the
environment variable auth.api_keys_env or the file auth.api_keys_file (never from the config).
Policy versions are followed on the policy-versions topic. See docs/PROXY.md.

Examples:
  TAU2_PROXY_API_KEYS=sk-local tau2-proxy kafka.brokers=[kafka1:9092] \
      policy.endpoints=[http://sglang-0:30000,http://sglang-1:30000] model=qwen3-8b-policy
  # a laptop: beside tau2-broker (127.0.0.1:9092), no keys, a local SGLang server as the policy
  tau2-proxy kafka.brokers=[127.0.0.1:9092] auth.disabled=true policy.endpoints=[http://127.0.0.1:30000]`

// Config is tau2-proxy's configuration.
type Config struct {
	// Kafka is the transport.
	Kafka        tkafka.Config `yaml:"kafka"`
	proxy.Config `yaml:",inline"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Kafka: tkafka.DefaultConfig(), Config: proxy.DefaultConfig()}
}

func main() {
	cfg := DefaultConfig()
	cli.Main(cli.App{Name: "tau2-proxy", Usage: usage, MetricsAddr: ":9420"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return run(ctx, &cfg, rt)
	})
}

func run(ctx context.Context, cfg *Config, rt *cli.Runtime) error {
	if err := cfg.Kafka.Validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err := cfg.Config.Validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	keys, err := cfg.Auth.LoadAPIKeys()
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	t := cfg.Kafka.Topics
	if t.Trajectories == "" || t.InfraErrors == "" || t.PolicyVersions == "" {
		return fmt.Errorf("%w: kafka topics trajectories, infra_errors and policy_versions must be named", cli.ErrUsage)
	}
	tok, err := episode.LoadTokenizer(cfg.Tokenizer)
	if err != nil {
		return err
	}
	pol, _, err := llm.NewPolicy(cfg.Policy, rt.Registry)
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err := tkafka.EnsureTopics(ctx, cfg.Kafka, t.Trajectories, t.InfraErrors, t.PolicyVersions); err != nil {
		return err
	}
	km, err := tkafka.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	pm, err := proxy.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	trajs, err := tkafka.NewWriter(cfg.Kafka, t.Trajectories, km)
	if err != nil {
		return err
	}
	defer trajs.Close()
	infra, err := tkafka.NewWriter(cfg.Kafka, t.InfraErrors, km)
	if err != nil {
		return err
	}
	defer infra.Close()
	vs := &rollout.Versions{}
	srv, err := proxy.New(cfg.Config, proxy.Deps{Policy: pol, Tokenizer: tok, Trajectories: trajs, InfraErrors: infra,
		Version: vs.Latest, APIKeys: keys, Metrics: pm, Log: rt.Log})
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("proxy: listen %s: %w", cfg.Listen, err)
	}
	vctx, cancelVersions := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := rollout.FollowVersions(vctx, cfg.Kafka, vs, nil, km, rt.Log); err != nil {
			rt.Log.Error("policy-version follower stopped", "err", err)
		}
	}()
	rt.Log.Info("proxy started", "listen", ln.Addr().String(), "model", cfg.Model, "policy_backend", cfg.Policy.Backend,
		"endpoints", len(cfg.Policy.Endpoints), "auth", !cfg.Auth.Disabled, slog.Any("kafka", cfg.Kafka))
	rt.Ready()
	err = srv.Serve(ctx, ln)
	cancelVersions()
	wg.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}
