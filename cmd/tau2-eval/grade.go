package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/lib/durable"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/required"
	"tau2rl/tau2/data"
	"tau2rl/tau2/evaluator"
)

func init() {
	commands["grade"] = command{summary: "re-grade a τ² results file with the Go evaluator", main: gradeMain}
}

// gradeConfig is `tau2-eval grade`'s configuration (YAML or key=value).
type gradeConfig struct {
	// Input is the τ² results file (the positional argument).
	Input string `yaml:"input"`
	// Output is where the regraded file goes (-o); "" grades without writing.
	Output string `yaml:"output"`
	// DataDir is the τ² data directory ("" = found by lib/assets: TAU2_DATA_DIR, ../shared/tau2-data,
	// the cache, a pinned download; docs/ASSETS.md).
	DataDir string `yaml:"data_dir"`
	// Domain overrides info.environment_info.domain_name.
	Domain string `yaml:"domain"`
	// Workers is the number of parallel graders (0 = all cores).
	Workers int `yaml:"workers"`
	// Strict fails a simulation whose replayed writes return other results
	// than recorded (τ²'s live grading); default false, as `tau2
	// evaluate-trajs` re-grades.
	Strict bool `yaml:"strict"`
	// FreshTasks grades against the data directory's current task
	// definitions instead of the ones embedded in the file.
	FreshTasks bool `yaml:"fresh_tasks"`
	// TaskVersion selects the task files for fresh_tasks: head or v0.2.1.
	TaskVersion string `yaml:"task_version"`
	// Judge is the NL-assertion judge (any OpenAI-compatible endpoint);
	// without judge.endpoint.base_url, NL_ASSERTION is not evaluated.
	Judge llm.ChatConfig `yaml:"judge"`
	// ShowDifferences lists at most this many simulations whose new reward
	// differs from the file's.
	ShowDifferences int `yaml:"show_differences"`
}

func defaultGradeConfig() gradeConfig {
	j := llm.DefaultChatConfig()
	j.Model = evaluator.DefaultJudgeModel
	return gradeConfig{Judge: j, ShowDifferences: 20}
}

const gradeUsage = `tau2-eval grade RESULTS.json -o REGRADED.json [key=value …]

Re-computes every simulation's reward_info of a τ²-bench results file
(Results{info, tasks, simulations}) with the Go evaluator, writes the file
back unchanged except for the reward_info values, and prints pass^k
(τ²'s definition) for the new and the original rewards and how many
simulations agree. Simulations that cannot be graded keep their
reward_info and make the command exit with status 1.`

func gradeMain(args []string) {
	cfg := defaultGradeConfig()
	subcommand("grade", gradeUsage, "input", args, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return runGrade(ctx, &cfg, os.Stdout, rt)
	})
}

// Validate checks the configuration (cli calls it before the run: exit status 2).
func (c *gradeConfig) Validate() error {
	var errs []error
	if c.Input == "" {
		errs = append(errs, fmt.Errorf("no results file given: input (tau2-eval grade RESULTS.json) is %w", required.ErrMissing))
	}
	if c.Workers < 0 || c.ShowDifferences < 0 {
		errs = append(errs, errors.New("workers and show_differences must be ≥ 0"))
	}
	if c.FreshTasks {
		if _, err := data.ParseVersion(c.TaskVersion); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func runGrade(ctx context.Context, cfg *gradeConfig, out io.Writer, rt *cli.Runtime) error {
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	raw, err := os.ReadFile(cfg.Input)
	if err != nil {
		return fmt.Errorf("grade: %w", err)
	}
	t0 := time.Now()
	res, err := evaluator.ParseResults(raw)
	if err != nil {
		return fmt.Errorf("grade: %s: %w", cfg.Input, err)
	}
	domain := cfg.Domain
	if domain == "" {
		if domain, err = res.Domain(); err != nil {
			return fmt.Errorf("grade: %s: %w", cfg.Input, err)
		}
	}
	opts := evaluator.RegradeOptions{Workers: cfg.Workers,
		Options: evaluator.Options{Domain: domain, DataDir: cfg.DataDir, Strict: cfg.Strict}}
	if cfg.FreshTasks {
		dir, err := data.Dir(cfg.DataDir)
		if err != nil {
			return fmt.Errorf("grade: %w", err)
		}
		v, err := data.ParseVersion(cfg.TaskVersion)
		if err != nil {
			return fmt.Errorf("%w: %v", cli.ErrUsage, err)
		}
		if opts.Tasks, err = data.LoadTasks(dir, domain, v); err != nil {
			return fmt.Errorf("grade: %w", err)
		}
	}
	if cfg.Judge.Endpoint.BaseURL != "" {
		m, err := llm.NewMetrics(rt.Registry)
		if err != nil {
			return fmt.Errorf("grade: %w", err)
		}
		j, err := evaluator.NewChatJudge(cfg.Judge, m)
		if err != nil {
			return err
		}
		opts.Judge = j
	}
	rt.Ready()
	regraded, sims, err := evaluator.Regrade(ctx, res, opts)
	if err != nil {
		return fmt.Errorf("grade: %s: %w", cfg.Input, err)
	}
	elapsed := time.Since(t0)
	if cfg.Output != "" {
		if err := writeAtomic(cfg.Output, regraded); err != nil {
			return fmt.Errorf("grade: %w", err)
		}
	}
	failed := report(out, domain, res.NumTrials(), sims, cfg.ShowDifferences, opts.Judge != nil)
	fmt.Fprintf(out, "graded %d simulations in %v", len(sims), elapsed.Round(time.Millisecond))
	if cfg.Output != "" {
		fmt.Fprintf(out, "; wrote %s", cfg.Output)
	}
	fmt.Fprintln(out)
	if failed > 0 {
		return fmt.Errorf("grade: %d simulations could not be graded (they keep their original reward_info)", failed)
	}
	return nil
}

// report prints metrics and the comparison with the original rewards; it
// returns the number of simulations that could not be graded.
func report(w io.Writer, domain string, numTrials int, sims []evaluator.SimResult, maxDiff int, haveJudge bool) int {
	var newOut, oldOut []evaluator.Outcome
	agree, differ, noOld, failed, notEval := 0, 0, 0, 0, 0
	var diffs []string
	var errs []string
	for _, s := range sims {
		oldOut = append(oldOut, evaluator.Outcome{TaskID: s.TaskID, Termination: s.Termination, Reward: s.OldReward})
		if s.Err != nil {
			failed++
			if len(errs) < maxDiff {
				errs = append(errs, fmt.Sprintf("  %s (task %s): %v", s.ID, s.TaskID, s.Err))
			}
			newOut = append(newOut, evaluator.Outcome{TaskID: s.TaskID, Termination: s.Termination})
			continue
		}
		newOut = append(newOut, evaluator.Outcome{TaskID: s.TaskID, Termination: s.Termination, Reward: s.New.Reward})
		if !s.New.Evaluated() {
			notEval++
		}
		switch {
		case s.OldReward == nil:
			noOld++
		case s.New.Reward == nil:
		case evaluator.IsSuccessful(*s.OldReward) == s.New.Success():
			agree++
		default:
			differ++
			if len(diffs) < maxDiff {
				trial := "-"
				if s.Trial != nil {
					trial = fmt.Sprint(*s.Trial)
				}
				diffs = append(diffs, fmt.Sprintf("  task %s trial %s (%s): %v -> %v", s.TaskID, trial, s.ID, *s.OldReward, *s.New.Reward))
			}
		}
	}
	fmt.Fprintf(w, "domain %s: %d simulations\n", domain, len(sims))
	printMetrics(w, "regraded", evaluator.ComputeMetrics(newOut, numTrials))
	if noOld < len(sims) {
		printMetrics(w, "original", evaluator.ComputeMetrics(oldOut, numTrials))
	}
	compared := agree + differ
	fmt.Fprintf(w, "  agreement: %d/%d simulations agree with the file's reward (%d differ, %d without a reward in the file)\n",
		agree, compared, differ, noOld)
	if notEval > 0 {
		why := "no NL judge configured"
		if haveJudge {
			why = "NL judge"
		}
		fmt.Fprintf(w, "  not evaluated: %d simulations need NL_ASSERTION (%s); reward null, excluded from pass^k\n", notEval, why)
	}
	if len(diffs) > 0 {
		fmt.Fprintln(w, "  differences:")
		fmt.Fprintln(w, strings.Join(diffs, "\n"))
	}
	if failed > 0 {
		fmt.Fprintf(w, "  could not be graded: %d\n%s\n", failed, strings.Join(errs, "\n"))
	}
	return failed
}

func printMetrics(w io.Writer, label string, m evaluator.Metrics) {
	fmt.Fprintf(w, "  %-9s avg reward %.4f", label+":", m.AvgReward)
	for k, p := range m.PassHatK {
		fmt.Fprintf(w, "  pass^%d %.4f", k+1, p)
	}
	fmt.Fprintf(w, "  (%d tasks", m.Tasks)
	if m.InfraErrors > 0 {
		fmt.Fprintf(w, ", %d infrastructure errors excluded", m.InfraErrors)
	}
	if m.TasksExcluded > 0 {
		fmt.Fprintf(w, ", %d tasks without a complete reward excluded", m.TasksExcluded)
	}
	fmt.Fprintln(w, ")")
}

// writeAtomic writes a results file atomically and durably (lib/durable: a synced temporary
// file renamed into place, then the directory synced), so a crash never leaves a partial file
// where τ² tools expect a complete one.
func writeAtomic(path string, b []byte) error { return durable.WriteFile(path, b, 0o644) }
