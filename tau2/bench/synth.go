package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"tau2rl/lib/durable"
	"tau2rl/lib/required"
	"tau2rl/tau2/data"
	"tau2rl/tau2/evaluator/goldgen"
)

// SynthConfig is `tau2-eval synth`'s configuration.
type SynthConfig struct {
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

// Validate checks the configuration (the command calls it before the run: exit status 2).
func (c *SynthConfig) Validate() error {
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

// Synth writes to cfg.Output a τ²-format results file whose simulations replay each task's gold
// actions and the variants asked for (goldgen), with reward_info null, and says so on out.
// Configuration errors wrap ErrUsage.
func Synth(cfg *SynthConfig, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
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
				return fmt.Errorf("%w: unknown variant %q", ErrUsage, v)
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
		return fmt.Errorf("%w: %v", ErrUsage, err)
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
	if err := durable.WriteFile(cfg.Output, b, 0o644); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	fmt.Fprintf(out, "wrote %d simulations of %d %s tasks to %s\n", len(runs), len(tasks), cfg.Domain, cfg.Output)
	return nil
}

// DefaultSynthConfig returns the documented defaults: one gold transcript per airline base task.
func DefaultSynthConfig() SynthConfig {
	return SynthConfig{Domain: "airline", Split: "base", Trials: 1, Variants: string(goldgen.Gold)}
}
