package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"tau2rl/lib/durable"
	"tau2rl/lib/logs"
	"tau2rl/lib/uuid"
	"tau2rl/schemas"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/episode"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/evaluator/goldgen"
	"tau2rl/tau2/pyjson"
)

// RunConfig is `tau2-eval run`'s configuration: the producer's episode
// settings (econfig.*, policy.*, user_endpoint.*, judge.*) plus the run.
type RunConfig struct {
	episode.RunnerConfig `yaml:",inline"`
	// Split is the task split to run ("" = every task of the domain).
	// Default "test".
	Split string `yaml:"split"`
	// TaskIDs restricts the run to these tasks (in split order).
	TaskIDs []string `yaml:"task_ids"`
	// NumTasks keeps only the first n tasks (0 = all).
	NumTasks int `yaml:"num_tasks"`
	// NumTrials is k: trials per task. Default 4 (τ²'s leaderboard).
	NumTrials int `yaml:"num_trials"`
	// Concurrency is how many episodes run at once. Default 8.
	Concurrency int `yaml:"concurrency"`
	// Seed draws each trial's seed as τ² does (random.seed(seed), then
	// randint(0, 1e6) per trial). Default 300.
	Seed int64 `yaml:"seed"`
	// Sampling are the policy's decoding parameters. Default temperature
	// 0 (τ²'s default; AReaL evaluates at 0.6), max_tokens 0 (the
	// policy.max_new_tokens default).
	Sampling schemas.SamplingParams `yaml:"sampling"`
	// Output is the τ² results file to write (-o); "" prints only the
	// table.
	Output string `yaml:"output"`
}

// DefaultRunConfig returns the documented defaults (τ²'s: the test split, 4 trials, seed 300).
func DefaultRunConfig() RunConfig {
	return RunConfig{RunnerConfig: episode.DefaultRunnerConfig(), Split: "test", NumTrials: 4, Concurrency: 8, Seed: 300}
}

type evalUnit struct {
	task  int
	trial int
	seed  int64
	res   *episode.Result
}

// Validate checks the whole configuration (the command calls it before the run: exit status 2).
func (c *RunConfig) Validate() error {
	var errs []error
	if c.NumTrials < 1 || c.Concurrency < 1 || c.NumTasks < 0 {
		errs = append(errs, errors.New("num_trials and concurrency must be ≥ 1, num_tasks ≥ 0"))
	}
	if err := c.RunnerConfig.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run runs every selected task of the split cfg.NumTrials times against the policy, cfg.Concurrency
// episodes at once, grades each with the Go evaluator, writes τ²'s results file to cfg.Output (when
// set) and prints the pass^k table to out. Interrupted (ctx ends), it keeps the finished
// simulations, writes them like a complete run and fails; it also fails when every simulation was
// an infrastructure error. Configuration errors wrap ErrUsage.
func Run(ctx context.Context, cfg *RunConfig, out io.Writer, d Deps) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	log := logs.OrDiscard(d.Log)
	runners, err := episode.NewRunners(cfg.RunnerConfig, func() int64 { return 0 }, d.Registry)
	if err != nil {
		return err
	}
	domain := cfg.Econfig.Domain
	runner, err := runners.For(domain)
	if err != nil {
		return err
	}
	set, err := episode.LoadTasks(cfg.DataDir, domain, cfg.Split)
	if err != nil {
		return err
	}
	tasks := set.Tasks
	if len(cfg.TaskIDs) > 0 {
		want := map[string]bool{}
		for _, id := range cfg.TaskIDs {
			want[id] = true
		}
		var sel []*taskT
		for _, t := range tasks {
			if want[t.ID] {
				sel = append(sel, t)
			}
		}
		if len(sel) != len(want) {
			return fmt.Errorf("%w: %d of the %d task_ids are not in %s/%s", ErrUsage, len(want)-len(sel), len(want), domain, cfg.Split)
		}
		tasks = sel
	}
	if cfg.NumTasks > 0 && cfg.NumTasks < len(tasks) {
		tasks = tasks[:cfg.NumTasks]
	}
	if len(tasks) == 0 {
		return fmt.Errorf("%w: no tasks to run in %s/%s", ErrUsage, domain, cfg.Split)
	}
	// τ²'s runner: random.seed(seed); one randint(0, 1_000_000) per trial.
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0))
	seeds := make([]int64, cfg.NumTrials)
	for i := range seeds {
		seeds[i] = rng.Int64N(1_000_001)
	}
	var units []*evalUnit
	for ti := range tasks {
		for trial := 0; trial < cfg.NumTrials; trial++ {
			units = append(units, &evalUnit{task: ti, trial: trial, seed: seeds[trial]})
		}
	}
	log.Info("evaluation started", "domain", domain, "split", cfg.Split, "tasks", len(tasks), "trials", cfg.NumTrials,
		"policy_mode", cfg.Policy.Mode, "concurrency", cfg.Concurrency)
	start := time.Now().UTC()
	work := make(chan *evalUnit)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				u.res = runner.Run(ctx, episode.Input{Task: tasks[u.task], Split: orAll(cfg.Split), ID: uuid.New(),
					Trial: u.trial, Seed: u.seed, Sampling: cfg.Sampling})
				mu.Lock()
				done++
				log.Info("simulation done", "n", done, "of", len(units), "task", tasks[u.task].ID, "trial", u.trial,
					"termination", u.res.Traj.Termination, "reward", u.res.Traj.Reward, "status", u.res.Traj.Status)
				mu.Unlock()
			}
		}()
	}
feed:
	for _, u := range units {
		select {
		case work <- u:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	// On SIGINT/SIGTERM the finished simulations are kept (an episode cut short by the signal is
	// not an infrastructure error: it is left out) and written like a complete run, and the run
	// fails: an interrupted evaluation is not a result.
	interrupted := ctx.Err() != nil
	var ran []*evalUnit
	for _, u := range units {
		if u.res == nil || (interrupted && u.res.Infra != nil &&
			(u.res.Infra.Stage == episode.StageCanceled || u.res.Infra.Stage == episode.StageTimeout)) {
			continue
		}
		ran = append(ran, u)
	}
	var outcomes []evaluator.Outcome
	var firstInfra error
	for _, u := range ran {
		o := evaluator.Outcome{TaskID: tasks[u.task].ID, Termination: u.res.Traj.Termination}
		if u.res.Traj.Status == schemas.StatusOK { // not_evaluated: real termination, no reward
			r := u.res.Traj.Reward
			o.Reward = &r
		} else if firstInfra == nil {
			firstInfra = u.res.Infra
		}
		outcomes = append(outcomes, o)
	}
	metrics := evaluator.ComputeMetrics(outcomes, cfg.NumTrials)
	if cfg.Output != "" {
		b, err := resultsFile(cfg, tasks, ran, start)
		if err != nil {
			return err
		}
		if err := durable.WriteFile(cfg.Output, b, 0o644); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		fmt.Fprintf(out, "wrote %d simulations to %s\n", len(ran), cfg.Output)
	}
	PrintPassK(out, []PassRow{{Label: domain, Metrics: metrics}})
	switch {
	case interrupted:
		// Not wrapping the context's error: cli would take it for a clean shutdown (exit 0).
		return fmt.Errorf("run: interrupted (%v) after %d of %d simulations; the results file holds the finished ones",
			context.Cause(ctx), len(ran), len(units))
	case len(ran) > 0 && metrics.InfraErrors == len(ran):
		return fmt.Errorf("run: all %d simulations failed with infrastructure errors, none was graded (first: %v)", len(ran), firstInfra)
	}
	return nil
}

type taskT = data.Task

// envPolicy is the domain policy the agent was given.
func envPolicy(cfg *RunConfig) (string, error) {
	e, err := env.New(cfg.Econfig.Domain, env.Options{DataDir: cfg.DataDir, Solo: cfg.Econfig.SoloMode})
	if err != nil {
		return "", err
	}
	return e.Policy, nil
}

func orAll(split string) string {
	if split == "" {
		return "all"
	}
	return split
}

const tsLayout = "2006-01-02T15:04:05.000000"

// resultsFile renders τ²'s Results JSON for the run.
func resultsFile(cfg *RunConfig, tasks []*taskT, units []*evalUnit, start time.Time) ([]byte, error) {
	agentImpl, agentLLM := "llm_agent", cfg.Policy.Name
	if cfg.Econfig.SoloMode {
		agentImpl = "llm_agent_solo"
	}
	if cfg.Policy.Mode == episode.ModeChat {
		agentLLM = cfg.Policy.Chat.Model
	}
	userImpl, userLLM := "user_simulator", any(cfg.Econfig.UserLLM)
	if cfg.Econfig.SoloMode {
		userImpl, userLLM = "dummy_user", nil
	}
	userArgs := pyjson.NewObject()
	for _, k := range sortedKeys(cfg.Econfig.UserLLMArgs) {
		userArgs.Set(k, jsonish(cfg.Econfig.UserLLMArgs[k]))
	}
	agentArgs := pyjson.NewObject("temperature", cfg.Sampling.Temperature)
	if cfg.Sampling.TopP > 0 {
		agentArgs.Set("top_p", cfg.Sampling.TopP)
	}
	policy := ""
	if e, err := envPolicy(cfg); err == nil {
		policy = e
	}
	info := pyjson.NewObject(
		"git_commit", "",
		"num_trials", int64(cfg.NumTrials),
		"max_steps", int64(cfg.Econfig.MaxSteps),
		"max_errors", int64(cfg.Econfig.MaxErrors),
		"user_info", pyjson.NewObject("implementation", userImpl, "llm", userLLM, "llm_args", userArgs, "global_simulation_guidelines", nil),
		"agent_info", pyjson.NewObject("implementation", agentImpl, "llm", agentLLM, "llm_args", agentArgs),
		"environment_info", pyjson.NewObject("domain_name", cfg.Econfig.Domain, "policy", policy, "tool_defs", nil),
		"seed", cfg.Seed,
	)
	tl := make([]any, len(tasks))
	for i, t := range tasks {
		if t.Raw == nil {
			return nil, fmt.Errorf("run: task %s has no raw form", t.ID)
		}
		tl[i] = t.Raw
	}
	sims := make([]any, 0, len(units))
	for _, u := range units {
		tr := u.res.Traj
		ems := episode.EvaluatorMessages(tr.Messages)
		msgs := make([]any, len(ems))
		for j := range ems {
			msgs[j] = goldgen.MessageValue(&ems[j], j, tr.Messages[j].Timestamp.Format(tsLayout))
		}
		var ri any
		if tr.Status == schemas.StatusOK && tr.RewardInfoJSON != "" {
			v, err := pyjson.Loads(tr.RewardInfoJSON)
			if err != nil {
				return nil, fmt.Errorf("run: reward info of %s: %w", tr.ID, err)
			}
			ri = v
		}
		sim := pyjson.NewObject(
			"id", tr.ID, "task_id", tr.TaskID,
			"timestamp", tr.EndedAt.Format(tsLayout),
			"start_time", tr.StartedAt.Format(tsLayout), "end_time", tr.EndedAt.Format(tsLayout),
			"duration", tr.EndedAt.Sub(tr.StartedAt).Seconds(),
			"termination_reason", tr.Termination,
			"agent_cost", nil, "user_cost", nil,
			"reward_info", ri,
			"messages", msgs,
			"trial", int64(u.trial), "seed", u.seed,
		)
		switch tr.Status {
		case schemas.StatusOK:
		case schemas.StatusNotEvaluated:
			// reward_info stays null and the termination is the real one, so `tau2-eval grade`
			// with a judge grades it.
			sim.Set("info", pyjson.NewObject("not_evaluated", tr.Error))
		default:
			sim.Set("info", pyjson.NewObject("error", tr.Error))
		}
		sims = append(sims, sim)
	}
	doc := pyjson.NewObject("timestamp", start.Format(tsLayout), "info", info, "tasks", tl, "simulations", sims)
	return evaluator.AppendJSON(nil, doc, evaluator.JSONStyle{Indent: 2})
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonish converts YAML-decoded values into pyjson's value types.
func jsonish(v any) any {
	switch t := v.(type) {
	case int:
		return int64(t)
	case map[string]any:
		o := pyjson.NewObject()
		for _, k := range sortedKeys(t) {
			o.Set(k, jsonish(t[k]))
		}
		return o
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = jsonish(x)
		}
		return out
	}
	return v
}

// PassRow is one line of the pass^k table: a label (the domain, "airline v3") and its metrics.
type PassRow struct {
	Label   string
	Metrics evaluator.Metrics
}

// PrintPassK prints τ²'s metrics as a table: pass^1 … pass^maxK per row.
func PrintPassK(w io.Writer, rows []PassRow) {
	maxK := 0
	for _, r := range rows {
		maxK = max(maxK, len(r.Metrics.PassHatK))
	}
	fmt.Fprintf(w, "%-28s %6s %6s %6s %8s", "", "tasks", "sims", "infra", "avg")
	for k := 1; k <= maxK; k++ {
		fmt.Fprintf(w, " %7s", fmt.Sprintf("pass^%d", k))
	}
	fmt.Fprintln(w)
	var ungraded []string
	for _, r := range rows {
		avg := fmt.Sprintf("%8.3f", r.Metrics.AvgReward)
		if r.Metrics.Simulations-r.Metrics.NotEvaluated <= 0 {
			avg = fmt.Sprintf("%8s", "none") // not 0.000: nothing was graded
			ungraded = append(ungraded, r.Label)
		}
		fmt.Fprintf(w, "%-28s %6d %6d %6d %s", r.Label, r.Metrics.Tasks, r.Metrics.Simulations, r.Metrics.InfraErrors, avg)
		for k := 0; k < maxK; k++ {
			if k < len(r.Metrics.PassHatK) {
				fmt.Fprintf(w, " %7.3f", r.Metrics.PassHatK[k])
			} else {
				fmt.Fprintf(w, " %7s", "-")
			}
		}
		fmt.Fprintln(w)
	}
	for _, l := range ungraded {
		fmt.Fprintf(w, "%s: no graded simulations (every one was an infrastructure error or not evaluated): no reward, no pass^k\n", l)
	}
}
