package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"tau2rl/lib/durable"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/required"
	"tau2rl/tau2/data"
	"tau2rl/tau2/evaluator"
)

// GradeConfig is `tau2-eval grade`'s configuration (YAML or key=value).
type GradeConfig struct {
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

// DefaultGradeConfig returns the documented defaults (τ²'s judge model, 20 differences shown).
func DefaultGradeConfig() GradeConfig {
	j := llm.DefaultChatConfig()
	j.Model = evaluator.DefaultJudgeModel
	return GradeConfig{Judge: j, ShowDifferences: 20}
}

// Validate checks the configuration (the command calls it before the run: exit status 2).
func (c *GradeConfig) Validate() error {
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

// Grade re-grades every simulation of the results file cfg.Input with the Go evaluator (and the
// NL judge of cfg.Judge, when set), writes the file back with only the reward_info values changed
// to cfg.Output (when set), and prints to out pass^k for the new and the original rewards and how
// many simulations agree. Simulations that cannot be graded keep their reward_info and make it
// fail. Configuration errors wrap ErrUsage.
func Grade(ctx context.Context, cfg *GradeConfig, out io.Writer, d Deps) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
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
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		if opts.Tasks, err = data.LoadTasks(dir, domain, v); err != nil {
			return fmt.Errorf("grade: %w", err)
		}
	}
	if cfg.Judge.Endpoint.BaseURL != "" {
		m, err := llm.NewMetrics(d.Registry)
		if err != nil {
			return fmt.Errorf("grade: %w", err)
		}
		j, err := evaluator.NewChatJudge(cfg.Judge, m)
		if err != nil {
			return err
		}
		opts.Judge = j
	}
	d.ready()
	regraded, sims, err := evaluator.Regrade(ctx, res, opts)
	if err != nil {
		return fmt.Errorf("grade: %s: %w", cfg.Input, err)
	}
	elapsed := time.Since(t0)
	if cfg.Output != "" {
		if err := durable.WriteFile(cfg.Output, regraded, 0o644); err != nil {
			return fmt.Errorf("grade: %w", err)
		}
	}
	failed := printGrades(out, domain, res.NumTrials(), sims, cfg.ShowDifferences, opts.Judge != nil)
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

// printGrades prints metrics and the comparison with the original rewards; it
// returns the number of simulations that could not be graded.
func printGrades(w io.Writer, domain string, numTrials int, sims []evaluator.SimResult, maxDiff int, haveJudge bool) int {
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
