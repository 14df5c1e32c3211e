package main

import (
	"context"
	"os"

	"tau2rl/cmd/internal/cli"
	"tau2rl/tau2/bench"
)

func init() {
	commands["synth"] = command{summary: "write a τ² results file of gold-action transcripts", main: synthMain}
}

const synthUsage = `tau2-eval synth -o RESULTS.json domain=airline [split=base] [trials=1] [variants=gold]

Writes a τ²-format results file whose simulations replay each task's gold
actions (variants: gold, drop_last_write, change_arg, writes_only,
wrong_communicate, no_actions, max_steps, comma_numbers, or all), with
tool results computed by the Go environments and reward_info null. Input
for tau2-eval grade, its tests and benchmarks, and τ²'s own evaluate-trajs.`

// synthConfig is `tau2-eval synth`'s configuration: bench.SynthConfig's keys.
type synthConfig struct {
	bench.SynthConfig `yaml:",inline"`
}

func defaultSynthConfig() synthConfig { return synthConfig{bench.DefaultSynthConfig()} }

func synthMain(args []string) {
	cfg := defaultSynthConfig()
	subcommand("synth", synthUsage, "", args, &cfg, func(_ context.Context, _ *cli.Runtime) error {
		return usageOf(bench.Synth(&cfg.SynthConfig, os.Stdout))
	})
}
