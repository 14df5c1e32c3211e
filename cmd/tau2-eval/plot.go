package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"gonum.org/v1/plot/vg"

	"tau2rl/cmd/internal/cli"
	"tau2rl/consumers/figures"
	"tau2rl/schemas/dataset"
)

func init() {
	commands["plot"] = command{summary: "draw a run's curves (reward per policy version, pass^k, throughput, log-prob mismatch) as PNG and SVG", main: plotMain}
}

// plotConfig is `tau2-eval plot`'s configuration.
type plotConfig struct {
	// Dataset is the archive (a Parquet dataset directory, release, file or glob).
	Dataset string `yaml:"dataset"`
	// Report is a tau2-run experiment report.json, drawn instead of an archive: the reward per
	// policy version (from its per-version count, mean and standard deviation, the same band),
	// pass^k before and after GRPO, and the mismatch; the baseline defaults to the
	// demonstrator's success. For a run whose archive stayed on a rented GPU machine. Several
	// report.json files separated by commas (report=a.json,b.json,c.json: runs of one recipe
	// with different seeds) are drawn together instead (figures.DrawRuns): runs_reward, runs_passk
	// and runs_summary.{json,md}.
	Report string `yaml:"report"`
	// Filter selects trajectories (tau2-replay's filters).
	Filter dataset.Filter `yaml:"filter"`
	// Steps is the trainer's steps.jsonl (or its checkpoint directory), for the mismatch figure.
	Steps string `yaml:"steps"`
	// Timeline is a tau2-run GRPO stage's gputime.jsonl, for the gputime figure. With report=
	// it defaults to the one the report names, or gputime.jsonl beside the report.
	Timeline string `yaml:"timeline"`
	// Out is the directory the figures are written to. Default "figures".
	Out string `yaml:"out"`
	// Formats are png and/or svg. Default both.
	Formats []string `yaml:"formats"`
	// MaxK caps k of pass^k. Default 4.
	MaxK int `yaml:"max_k"`
	// Baseline, when set, draws a horizontal line on the reward figure (e.g. the SFT level).
	Baseline *float64 `yaml:"baseline"`
	// Title prefixes every figure's title.
	Title string `yaml:"title"`
	// WidthCM and HeightCM size every figure. Default 16 × 10.
	WidthCM  float64 `yaml:"width_cm"`
	HeightCM float64 `yaml:"height_cm"`
}

const plotUsage = `tau2-eval plot dataset=DIR [steps=CHECKPOINT_DIR/steps.jsonl] out=figures [key=value …]
tau2-eval plot report=RUN_DIR/report.json out=figures [key=value …]
tau2-eval plot report=RUN1/report.json,RUN2/report.json,… out=figures [key=value …]

Draws a training run's curves from the archive (the archiver's Parquet dataset or a release;
filter.* as in tau2-replay) and the trainer's per-step log (steps.jsonl in its checkpoint
directory), each as PNG and SVG in out/:
  reward               mean τ² reward per policy version at episode start, 95% confidence band
                       (mean ± 1.96 standard errors), optional baseline line
  passk                pass^k, k = 1..max_k, per domain (τ²'s estimator)
  tokens_per_minute    generated tokens per minute of episode end time
  episodes_per_minute  episodes per minute
  mismatch             per trainer step: mean |behaviour − proximal| log-prob and the fraction of
                       tokens masked by behav_imp_weight_cap (needs steps=)
  gputime              the GRPO stage's timeline: per sampler and trainer the share of each
                       interval spent per phase (decode, prefill, train, weight sync, …), and
                       each GPU's nvidia-smi utilisation (needs timeline=RUN_DIR/gputime.jsonl;
                       with report=, the run's own)

With report= (a tau2-run experiment's report.json, no archive needed): reward, passk (before
and after GRPO) and mismatch; baseline defaults to the demonstrator's success.

With several reports separated by commas (runs of one recipe, e.g. with different seeds):
  runs_reward          each run's mean reward per policy version (one line per run, labelled
                       "seed N · RUN_DIR"), the mean across runs with the min–max band, and the
                       demonstrators' mean success as a line (or baseline=)
  runs_passk           pass^1 and pass^max_k before and after GRPO, grouped per run
  runs_summary.json    per run pass^1 and pass^max_k before/after, and their mean, min and max
  runs_summary.md      the same as a markdown table

Examples:
  tau2-eval plot dataset=data/trajectories steps=checkpoints baseline=0.4 out=figures
  tau2-eval plot report=run/20261125-182316/report.json out=docs/figures/learning
  tau2-eval plot report=run/a/report.json,run/b/report.json,run/c/report.json out=docs/figures/learning/seeds`

func plotMain(args []string) {
	cfg := defaultPlotConfig()
	subcommand("plot", plotUsage, "dataset", args, &cfg, func(ctx context.Context, _ *cli.Runtime) error {
		return runPlot(ctx, &cfg, os.Stdout)
	})
}

func defaultPlotConfig() plotConfig {
	return plotConfig{Out: "figures", Formats: []string{"png", "svg"}, MaxK: 4, WidthCM: 16, HeightCM: 10}
}

func runPlot(ctx context.Context, cfg *plotConfig, out io.Writer) error {
	switch {
	case cfg.Dataset == "" && cfg.Report == "":
		return fmt.Errorf("%w: dataset (an archive) or report (a tau2-run experiment report.json) is required", cli.ErrUsage)
	case cfg.Dataset != "" && cfg.Report != "":
		return fmt.Errorf("%w: dataset and report are alternatives: set one", cli.ErrUsage)
	case cfg.Out == "":
		return fmt.Errorf("%w: out is required", cli.ErrUsage)
	case cfg.MaxK < 1:
		return fmt.Errorf("%w: max_k must be ≥ 1", cli.ErrUsage)
	case !(cfg.WidthCM > 0 && cfg.HeightCM > 0):
		return fmt.Errorf("%w: width_cm and height_cm must be > 0", cli.ErrUsage)
	}
	for _, f := range cfg.Formats {
		if f != "png" && f != "svg" {
			return fmt.Errorf("%w: formats: %q is not png or svg", cli.ErrUsage, f)
		}
	}
	if err := cfg.Filter.Validate(); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	var (
		in       figures.Input
		baseline = cfg.Baseline
		head     string
		err      error
	)
	if reports := reportPaths(cfg.Report); len(reports) > 1 {
		return plotRuns(cfg, reports, baseline, out)
	}
	if cfg.Report != "" {
		var demo *float64
		in, demo, head, err = figures.FromReport(cfg.Report, cfg.MaxK)
		if baseline == nil { // the demonstrator's success unless the command set one
			baseline = demo
		}
	} else {
		in, head, err = figures.FromArchive(ctx, cfg.Dataset, cfg.Filter, cfg.Steps, cfg.MaxK)
	}
	if err != nil {
		return err
	}
	if cfg.Timeline != "" {
		if in.Timeline, err = figures.ReadTimelineFile(cfg.Timeline); err != nil {
			return err
		}
	}
	files, err := figures.Draw(cfg.Out, in, figures.Options{Formats: cfg.Formats, Baseline: baseline, Title: cfg.Title,
		Width: vg.Length(cfg.WidthCM) * vg.Centimeter, Height: vg.Length(cfg.HeightCM) * vg.Centimeter})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, head)
	for _, f := range files {
		fmt.Fprintln(out, "wrote", f)
	}
	return nil
}

// reportPaths splits report= at commas (empty parts, from a trailing comma, are dropped).
func reportPaths(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// plotRuns draws several runs' report.json files on the same figures (figures.DrawRuns).
func plotRuns(cfg *plotConfig, reports []string, baseline *float64, out io.Writer) error {
	runs, err := figures.FromReports(reports, cfg.MaxK)
	if err != nil {
		return err
	}
	files, err := figures.DrawRuns(cfg.Out, runs, cfg.MaxK, figures.Options{Formats: cfg.Formats, Baseline: baseline, Title: cfg.Title,
		Width: vg.Length(cfg.WidthCM) * vg.Centimeter, Height: vg.Length(cfg.HeightCM) * vg.Centimeter})
	if err != nil {
		return err
	}
	s := figures.Summarize(runs, cfg.MaxK)
	head := fmt.Sprintf("%d runs", len(runs))
	if s.Pass1After.Runs > 0 {
		head += fmt.Sprintf(": pass^1 after GRPO mean %.3f (min %.3f, max %.3f)", s.Pass1After.Mean, s.Pass1After.Min, s.Pass1After.Max)
	}
	if s.PassKAfter.Runs > 0 {
		head += fmt.Sprintf(", pass^%d mean %.3f (min %.3f, max %.3f)", s.K, s.PassKAfter.Mean, s.PassKAfter.Min, s.PassKAfter.Max)
	}
	fmt.Fprintln(out, head)
	for _, f := range files {
		fmt.Fprintln(out, "wrote", f)
	}
	return nil
}
