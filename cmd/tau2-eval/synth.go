package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"tau2rl/cmd/internal/cli"
	"tau2rl/lib/required"
	"tau2rl/tau2/data"
	"tau2rl/tau2/evaluator/goldgen"
)

func init() {
	commands["synth"] = command{summary: "write a τ² results file of gold-action transcripts", main: synthMain}
}

// synthConfig is `tau2-eval synth`'s configuration.
type synthConfig struct {
	// Output is the results file to write (-o).
	Output string `yaml:"output"`
	// DataDir is the τ² data directory.
	DataDir string `yaml:"data_dir"`
	// Domain is airline, retail, telecom, telecom-workflow or mock.
	Domain string `yaml:"domain"`
	// Split restricts the tasks ("" = all tasks of the file).
	Split string `yaml:"split"`
	// TaskVersion is head or v0.2.1.
	TaskVersion string `yaml:"task_version"`
	// Trials is the number of simulations per task and variant.
	Trials int `yaml:"trials"`
	// Variants is a comma-separated list of goldgen variants, or "all".
	Variants string `yaml:"variants"`
}

const synthUsage = `tau2-eval synth -o RESULTS.json domain=airline [split=base] [trials=1] [variants=gold]

Writes a τ²-format results file whose simulations replay each task's gold
actions (variants: gold, drop_last_write, change_arg, writes_only,
wrong_communicate, no_actions, max_steps, comma_numbers, or all), with
tool results computed by the Go environments and reward_info null. Input
for tau2-eval grade, its tests and benchmarks, and τ²'s own evaluate-trajs.`

func synthMain(args []string) {
	cfg := defaultSynthConfig()
	subcommand("synth", synthUsage, "", args, &cfg, func(_ context.Context, _ *cli.Runtime) error {
		return runSynth(&cfg)
	})
}

func defaultSynthConfig() synthConfig {
	return synthConfig{Domain: "airline", Split: "base", Trials: 1, Variants: string(goldgen.Gold)}
}

// Validate checks the configuration (cli calls it before the run: exit status 2).
func (c *synthConfig) Validate() error {
	var errs []error
	if c.Output == "" {
		errs = append(errs, fmt.Errorf("-o RESULTS.json is %w", required.ErrMissing))
	}
	if c.Trials < 1 {
		errs = append(errs, fmt.Errorf("trials: %d must be ≥ 1", c.Trials))
	}
	if c.Variants != "all" {
		for _, v := range strings.Split(c.Variants, ",") {
			if !slices.Contains(goldgen.Variants, goldgen.Variant(strings.TrimSpace(v))) {
				errs = append(errs, fmt.Errorf("variants: unknown variant %q", strings.TrimSpace(v)))
			}
		}
	}
	if _, err := data.ParseVersion(c.TaskVersion); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func runSynth(cfg *synthConfig) error {
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	var variants []goldgen.Variant
	if cfg.Variants == "all" {
		variants = goldgen.Variants
	} else {
		for _, v := range strings.Split(cfg.Variants, ",") {
			v = strings.TrimSpace(v)
			ok := false
			for _, k := range goldgen.Variants {
				ok = ok || string(k) == v
			}
			if !ok {
				return fmt.Errorf("%w: unknown variant %q", cli.ErrUsage, v)
			}
			variants = append(variants, goldgen.Variant(v))
		}
	}
	dir, err := data.Dir(cfg.DataDir)
	if err != nil {
		return err
	}
	ver, err := data.ParseVersion(cfg.TaskVersion)
	if err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	tasks, err := data.LoadSplit(dir, cfg.Domain, ver, cfg.Split)
	if err != nil {
		return err
	}
	g := &goldgen.Generator{Domain: cfg.Domain, DataDir: dir}
	var runs []*goldgen.Run
	for _, t := range tasks {
		for _, v := range variants {
			if !g.Applicable(t, v) {
				continue
			}
			for trial := 0; trial < cfg.Trials; trial++ {
				r, err := g.Build(t, v, trial)
				if err != nil {
					return err
				}
				runs = append(runs, r)
			}
		}
	}
	b, err := g.Results(tasks, runs, cfg.Trials)
	if err != nil {
		return err
	}
	if err := writeAtomic(cfg.Output, b); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	fmt.Printf("wrote %d simulations of %d %s tasks to %s\n", len(runs), len(tasks), cfg.Domain, cfg.Output)
	return nil
}
