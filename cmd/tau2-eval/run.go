package main

import (
	"context"
	"errors"
	"io"
	"os"

	"tau2rl/cmd/internal/cli"
	"tau2rl/tau2/bench"
)

func init() {
	commands["run"] = command{summary: "run a task split with k trials against a policy; write a τ² results file and pass^k", main: runMain}
}

const runUsage = `tau2-eval run -o RESULTS.json econfig.domain=airline split=test num_trials=4 [key=value …]

Runs every task of a split num_trials times against a policy — token mode (policy.mode=token:
SGLang/vLLM with Qwen3 prompts rendered here) or chat mode (policy.mode=chat: any OpenAI-compatible
chat API, e.g. policy.chat.endpoint.base_url=https://api.openai.com/v1 policy.chat.model=gpt-4.1)
— with the user simulator of econfig.user_llm_base_url, grades each episode with the Go τ²
evaluator, writes a results file in τ²-bench's format (Results{timestamp, info, tasks,
simulations}) and prints pass^k for k = 1..num_trials. Infrastructure errors are recorded with
termination_reason infrastructure_error and excluded from the metrics, as in τ².`

// runConfig is `tau2-eval run`'s configuration: bench.RunConfig's keys.
type runConfig struct {
	bench.RunConfig `yaml:",inline"`
}

func defaultRunConfig() runConfig { return runConfig{bench.DefaultRunConfig()} }

func runMain(args []string) {
	cfg := defaultRunConfig()
	subcommand("run", runUsage, "", args, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return runRun(ctx, &cfg, os.Stdout, rt)
	})
}

func runRun(ctx context.Context, cfg *runConfig, out io.Writer, rt *cli.Runtime) error {
	return usageOf(bench.Run(ctx, &cfg.RunConfig, out, deps(rt)))
}

// deps hands bench the process's logger and metrics registry.
func deps(rt *cli.Runtime) bench.Deps {
	return bench.Deps{Log: rt.Log, Registry: rt.Registry, Ready: rt.Ready}
}

// usageOf makes bench's configuration errors exit status 2.
func usageOf(err error) error {
	if errors.Is(err, bench.ErrUsage) {
		return cli.Usage(err)
	}
	return err
}
