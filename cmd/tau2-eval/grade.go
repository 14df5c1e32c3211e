package main

import (
	"context"
	"io"
	"os"

	"tau2rl/cmd/internal/cli"
	"tau2rl/tau2/bench"
)

func init() {
	commands["grade"] = command{summary: "re-grade a τ² results file with the Go evaluator", main: gradeMain}
}

const gradeUsage = `tau2-eval grade RESULTS.json -o REGRADED.json [key=value …]

Re-computes every simulation's reward_info of a τ²-bench results file
(Results{info, tasks, simulations}) with the Go evaluator, writes the file
back unchanged except for the reward_info values, and prints pass^k
(τ²'s definition) for the new and the original rewards and how many
simulations agree. Simulations that cannot be graded keep their
reward_info and make the command exit with status 1.`

// gradeConfig is `tau2-eval grade`'s configuration: bench.GradeConfig's keys.
type gradeConfig struct {
	bench.GradeConfig `yaml:",inline"`
}

func defaultGradeConfig() gradeConfig { return gradeConfig{bench.DefaultGradeConfig()} }

func gradeMain(args []string) {
	cfg := defaultGradeConfig()
	subcommand("grade", gradeUsage, "input", args, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return runGrade(ctx, &cfg, os.Stdout, rt)
	})
}

func runGrade(ctx context.Context, cfg *gradeConfig, out io.Writer, rt *cli.Runtime) error {
	return usageOf(bench.Grade(ctx, &cfg.GradeConfig, out, deps(rt)))
}
