package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gonum.org/v1/plot/vg"

	"tau2rl/cmd/internal/cli"
	"tau2rl/consumers/figures"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/steplog"
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
	// demonstrator's success. For a run whose archive stayed on a rented GPU machine.
	Report string `yaml:"report"`
	// Filter selects trajectories (tau2-replay's filters).
	Filter dataset.Filter `yaml:"filter"`
	// Steps is the trainer's steps.jsonl (or its checkpoint directory), for the mismatch figure.
	Steps string `yaml:"steps"`
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

With report= (a tau2-run experiment's report.json, no archive needed): reward, passk (before
and after GRPO) and mismatch; baseline defaults to the demonstrator's success.

Examples:
  tau2-eval plot dataset=data/trajectories steps=checkpoints baseline=0.4 out=figures
  tau2-eval plot report=run/20261125-182316/report.json out=docs/figures/learning`

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
	if cfg.Report != "" {
		in, baseline, head, err = reportInput(cfg)
	} else {
		in, head, err = archiveInput(ctx, cfg)
	}
	if err != nil {
		return err
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

// archiveInput reads the figures' series from the archive (and the step log) and says what it
// read.
func archiveInput(ctx context.Context, cfg *plotConfig) (figures.Input, string, error) {
	var in figures.Input
	ds, err := dataset.Open(cfg.Dataset)
	if err != nil {
		return in, "", fmt.Errorf("plot: %w", err)
	}
	seen := map[string]bool{}
	var trajs []*schemas.Trajectory
	if _, err := ds.Scan(ctx, cfg.Filter, func(t *schemas.Trajectory) error {
		if !seen[t.ID] { // an id archived twice counts once
			seen[t.ID] = true
			trajs = append(trajs, t)
		}
		return nil
	}); err != nil {
		return in, "", fmt.Errorf("plot: %w", err)
	}
	if len(trajs) == 0 {
		return in, "", errors.New("plot: no trajectory of the dataset passes the filter")
	}
	in = figures.Input{
		Reward:     figures.RewardByVersion(trajs),
		PassK:      figures.PassKByDomain(trajs, cfg.MaxK),
		Throughput: figures.Throughput(trajs),
	}
	if cfg.Steps != "" {
		recs, err := steplog.Read(cfg.Steps)
		if err != nil {
			return in, "", fmt.Errorf("plot: %w", err)
		}
		in.Mismatch = figures.Mismatch(recs)
	}
	head := fmt.Sprintf("%d trajectories, %d policy versions", len(trajs), len(in.Reward))
	if len(in.Reward) > 0 {
		first, last := in.Reward[0], in.Reward[len(in.Reward)-1]
		head += fmt.Sprintf(", mean reward v%.0f %.3f → v%.0f %.3f", first.X, first.Y, last.X, last.Y)
	}
	return in, head, nil
}

// experimentReport is the part of tau2-run experiment's report.json that plot draws.
type experimentReport struct {
	Config struct {
		Domain string `json:"Domain"`
	} `json:"config"`
	Demos struct {
		Episodes   int     `json:"episodes"`
		MeanReward float64 `json:"mean_reward"`
	} `json:"demonstrations"`
	Before evalRow `json:"eval_before"`
	After  evalRow `json:"eval_after"`
	GRPO   struct {
		PerVersion []struct {
			Version  int64   `json:"version"`
			Episodes int     `json:"episodes"`
			Mean     float64 `json:"mean_reward"`
			Std      float64 `json:"std"`
		} `json:"reward_per_version"`
		AbsDiff []float64 `json:"behav_abs_diff_per_step"`
		Capped  []float64 `json:"behav_cap_fraction_per_step"`
	} `json:"grpo"`
}

// evalRow is one tau2-eval run of the report (its fields carry no json tags there).
type evalRow struct {
	Tasks int
	PassK []float64
}

// reportInput reads the figures' series from an experiment's report.json; its baseline is the
// demonstrator's success unless the command set one.
func reportInput(cfg *plotConfig) (figures.Input, *float64, string, error) {
	b, err := os.ReadFile(cfg.Report)
	if err != nil {
		return figures.Input{}, nil, "", fmt.Errorf("plot: %w", err)
	}
	in, demo, err := parseReport(b, cfg.MaxK)
	if err != nil {
		return in, nil, "", fmt.Errorf("plot: %s: %w", cfg.Report, err)
	}
	baseline := cfg.Baseline
	if baseline == nil {
		baseline = demo
	}
	first, last := in.Reward[0], in.Reward[len(in.Reward)-1]
	return in, baseline, fmt.Sprintf("report %s: %d policy versions, mean reward v%.0f %.3f → v%.0f %.3f",
		cfg.Report, len(in.Reward), first.X, first.Y, last.X, last.Y), nil
}

// parseReport turns a report.json into the figures' series (pass^k cut to maxK) and the
// demonstrator's success (nil without demonstrations). A report without reward per version, with
// a version of no episodes or a negative deviation, or with mismatched per-step lists is an
// error.
func parseReport(b []byte, maxK int) (figures.Input, *float64, error) {
	var in figures.Input
	var r experimentReport
	if err := json.Unmarshal(b, &r); err != nil {
		return in, nil, fmt.Errorf("not a tau2-run experiment report: %w", err)
	}
	if len(r.GRPO.PerVersion) == 0 {
		return in, nil, errors.New("no reward per policy version (grpo.reward_per_version)")
	}
	if len(r.GRPO.AbsDiff) != len(r.GRPO.Capped) {
		return in, nil, fmt.Errorf("%d mismatch values but %d capped fractions", len(r.GRPO.AbsDiff), len(r.GRPO.Capped))
	}
	for _, v := range r.GRPO.PerVersion {
		if v.Episodes < 1 || v.Std < 0 {
			return in, nil, fmt.Errorf("version %d has %d episodes, std %v", v.Version, v.Episodes, v.Std)
		}
		in.Reward = append(in.Reward, figures.PointFromStats(float64(v.Version), v.Episodes, v.Mean, v.Std))
	}
	for i := range r.GRPO.AbsDiff {
		in.Mismatch = append(in.Mismatch, figures.StepPoint{Step: int64(i + 1), AbsDiff: r.GRPO.AbsDiff[i], CapMasked: r.GRPO.Capped[i]})
	}
	for _, e := range []struct {
		name string
		k    []float64
		n    int
	}{{"before GRPO", r.Before.PassK, r.Before.Tasks}, {"after GRPO", r.After.PassK, r.After.Tasks}} {
		if len(e.k) > 0 {
			k := e.k[:min(len(e.k), max(maxK, 1))]
			in.PassK = append(in.PassK, figures.PassK{Domain: strings.TrimSpace(r.Config.Domain + " " + e.name), PassK: k, Tasks: e.n})
		}
	}
	var demo *float64
	if r.Demos.Episodes > 0 {
		demo = &r.Demos.MeanReward
	}
	return in, demo, nil
}
