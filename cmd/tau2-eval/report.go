package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"tau2rl/cmd/internal/cli"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/tau2/bench"
	"tau2rl/tau2/evaluator"
)

func init() {
	commands["report"] = command{summary: "pass^k per domain and policy version from an archived Parquet dataset", main: reportMain}
}

// reportConfig is `tau2-eval report`'s configuration.
type reportConfig struct {
	// Dataset is the archive root (the positional argument).
	Dataset string `yaml:"dataset"`
	// Domains and Splits restrict the report (empty = all).
	Domains []string `yaml:"domains"`
	Splits  []string `yaml:"splits"`
	// MaxK caps k (τ²: min(num_trials, fewest episodes of a task)).
	// Default 4.
	MaxK int `yaml:"max_k"`
	// ByVersion groups by the policy version at the episode's start.
	// Default true; false reports one row per domain.
	ByVersion bool `yaml:"by_version"`
	// Format is "text" (default) or "json".
	Format string `yaml:"format"`
}

const reportUsage = `tau2-eval report DATASET [domains=[airline]] [splits=[test]] [max_k=4] [by_version=true] [format=text|json]

Reads an archived Parquet dataset (the archiver's output) and prints τ²'s metrics per domain and
policy version: tasks, episodes, infrastructure errors (excluded from the metrics, as in τ²),
average reward and pass^k for k = 1..min(max_k, fewest episodes of a task in the row).`

func reportMain(args []string) {
	cfg := defaultReportConfig()
	subcommand("report", reportUsage, "dataset", args, &cfg, func(ctx context.Context, _ *cli.Runtime) error {
		return runReport(ctx, &cfg, os.Stdout)
	})
}

// reportKey is one row of the report.
type reportKey struct {
	Domain  string
	Version int64
}

// reportRow is a row in JSON output.
type reportRow struct {
	Domain        string `json:"domain"`
	PolicyVersion *int64 `json:"policy_version,omitempty"`
	Tasks         int    `json:"tasks"`
	Episodes      int    `json:"episodes"`
	InfraErrors   int    `json:"infra_errors"`
	// NotEvaluated counts episodes with status not_evaluated (no reward; their tasks are left out
	// of pass^k, they are not infrastructure errors).
	NotEvaluated int       `json:"not_evaluated"`
	AvgReward    float64   `json:"avg_reward"`
	PassHatK     []float64 `json:"pass_hat_k"`
}

// Validate checks the configuration (cli calls it before the run: exit status 2).
func (c *reportConfig) Validate() error {
	var errs []error
	if c.Dataset == "" {
		errs = append(errs, errors.New("no dataset directory given"))
	}
	if c.MaxK < 1 {
		errs = append(errs, errors.New("max_k must be ≥ 1"))
	}
	if c.Format != "text" && c.Format != "json" {
		errs = append(errs, fmt.Errorf("format %q is not text or json", c.Format))
	}
	return errors.Join(errs...)
}

func defaultReportConfig() reportConfig {
	return reportConfig{MaxK: 4, ByVersion: true, Format: "text"}
}

func runReport(ctx context.Context, cfg *reportConfig, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	ds, err := dataset.Open(cfg.Dataset)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	rows, err := reportRows(ctx, ds, cfg)
	if err != nil {
		return err
	}
	if cfg.Format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(out, "no episodes in the dataset match")
		return nil
	}
	var table []bench.PassRow
	for _, r := range rows {
		label := r.Domain
		if r.PolicyVersion != nil {
			label = fmt.Sprintf("%s v%d", r.Domain, *r.PolicyVersion)
		}
		table = append(table, bench.PassRow{Label: label, Metrics: evaluator.Metrics{PassHatK: r.PassHatK, AvgReward: r.AvgReward,
			Tasks: r.Tasks, Simulations: r.Episodes - r.InfraErrors, InfraErrors: r.InfraErrors}})
	}
	bench.PrintPassK(out, table)
	return nil
}

// reportRows scans the dataset and computes one row per domain (and
// version).
func reportRows(ctx context.Context, ds *dataset.Dataset, cfg *reportConfig) ([]reportRow, error) {
	outcomes := map[reportKey][]evaluator.Outcome{}
	filter := dataset.Filter{Domains: cfg.Domains, Splits: cfg.Splits, IncludeInfraErrors: true}
	_, err := ds.Scan(ctx, filter, func(t *schemas.Trajectory) error {
		k := reportKey{Domain: t.Domain}
		if cfg.ByVersion {
			k.Version = t.PolicyVersionStart
		}
		o := evaluator.Outcome{TaskID: t.TaskID, Termination: t.Termination}
		switch t.Status {
		case schemas.StatusOK:
			r := t.Reward
			o.Reward = &r
		case schemas.StatusNotEvaluated:
			// The real termination and no reward: the task's pass^k is undefined (excluded and
			// counted as not evaluated), it is not an infrastructure failure.
		default:
			o.Termination = evaluator.TerminationInfrastructureError
		}
		outcomes[k] = append(outcomes[k], o)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	keys := make([]reportKey, 0, len(outcomes))
	for k := range outcomes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Domain != keys[j].Domain {
			return keys[i].Domain < keys[j].Domain
		}
		return keys[i].Version < keys[j].Version
	})
	rows := make([]reportRow, 0, len(keys))
	for _, k := range keys {
		m := evaluator.ComputeMetrics(outcomes[k], cfg.MaxK)
		r := reportRow{Domain: k.Domain, Tasks: m.Tasks, Episodes: len(outcomes[k]), InfraErrors: m.InfraErrors,
			AvgReward: m.AvgReward, PassHatK: m.PassHatK}
		for _, o := range outcomes[k] {
			if o.Reward == nil && o.Termination != evaluator.TerminationInfrastructureError {
				r.NotEvaluated++
			}
		}
		if cfg.ByVersion {
			v := k.Version
			r.PolicyVersion = &v
		}
		rows = append(rows, r)
	}
	return rows, nil
}
