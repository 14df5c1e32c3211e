package localrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/evaluator/goldgen"

	// Every τ² domain registers itself with the environment registry: the write-task
	// selection asks a domain's toolkit which expected actions change its database.
	_ "tau2rl/tau2/domains"
)

// SelectTasks resolves the experiment's tasks once, so that every stage — demonstrations,
// SFT (through the demonstrations), evaluation and GRPO's admission — sees the same list: the
// split's tasks in file order, restricted to task_ids when set, to the tasks with a
// state-changing expected action when write_tasks_only is set, to the tasks gradable here
// (gradable), and to the first 'tasks' of what is left.
// The tasks left out are reported to out, with why.
func SelectTasks(cfg ExperimentConfig, out io.Writer) ([]string, error) {
	tasks, err := data.LoadSplit(cfg.DataDir, cfg.Domain, data.Head, cfg.Split)
	if err != nil {
		return nil, fmt.Errorf("tasks of %s/%s: %w", cfg.Domain, cfg.Split, err)
	}
	if len(cfg.TaskIDs) > 0 {
		if tasks, err = data.SelectIDs(tasks, func(t *data.Task) string { return t.ID }, cfg.TaskIDs); err != nil {
			return nil, fmt.Errorf("task_ids: %s split %q %w", cfg.Domain, cfg.Split, err)
		}
	}
	if cfg.WriteTasksOnly {
		e, err := env.New(cfg.Domain, env.Options{DataDir: cfg.DataDir})
		if err != nil {
			return nil, fmt.Errorf("write_tasks_only: %w", err)
		}
		kept := tasks[:0:0]
		for _, t := range tasks {
			if hasWrite(e, t) {
				kept = append(kept, t)
			}
		}
		if len(kept) == 0 {
			return nil, fmt.Errorf("write_tasks_only: none of the %d selected tasks of %s/%s expects a state-changing action", len(tasks), cfg.Domain, cfg.Split)
		}
		tasks = kept
	}
	tasks, left, err := gradable(cfg.DataDir, cfg.Domain, tasks)
	if err != nil {
		return nil, err
	}
	reportLeftOut(out, cfg.Domain, cfg.Split, left)
	if len(tasks) == 0 {
		return nil, fmt.Errorf("none of the selected tasks of %s/%s can be graded without an NL judge", cfg.Domain, cfg.Split)
	}
	if cfg.Tasks > 0 && cfg.Tasks < len(tasks) {
		tasks = tasks[:cfg.Tasks]
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return ids, nil
}

// hasWrite reports whether a task's expected actions include a tool that changes the database:
// on a task without one, a policy that reads the wrong record or skips a step still leaves the
// database as the gold trajectory does, so no mistake of the scripted demonstrator (wrong
// arguments, skipped writes) changes its reward, and it teaches GRPO nothing.
func hasWrite(e *env.Environment, t *data.Task) bool {
	if t.EvaluationCriteria == nil {
		return false
	}
	for _, a := range t.EvaluationCriteria.Actions {
		if e.IsMutating(a.Name) {
			return true
		}
	}
	return false
}

// yamlList renders ids as a YAML flow list of quoted strings, the form the binaries' key=value
// arguments parse ("7" stays a string, not the number 7).
func yamlList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = strconv.Quote(id)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// leftOut is a task gradable set aside, and why.
type leftOut struct{ id, why string }

// gradable keeps the tasks whose episodes this run can grade, whatever mistakes the scripted
// policy makes: the task's gold actions, and the variants of them that mimic those mistakes (the
// last write skipped, an argument changed, no action at all; goldgen), are each graded by the
// evaluator. It sets aside, saying why, the tasks that τ²'s evaluator cannot grade for one of
// them — mock's create_task_1_with_env_assertions asserts on the task_2 that its write creates,
// and τ²'s assertion raises "Task task_2 not found" when the write was skipped, so every such
// episode would be an infrastructure error — and the tasks whose gold reward needs the
// NL-assertion judge, which tau2-run does not run (their episodes would be not_evaluated: no
// reward to learn from). An error of another kind (the data cannot be read) is returned.
func gradable(dataDir, domain string, tasks []*data.Task) ([]*data.Task, []leftOut, error) {
	g := &goldgen.Generator{Domain: domain, DataDir: dataDir}
	grader, err := evaluator.NewGrader(evaluator.Options{Domain: domain, DataDir: dataDir})
	if err != nil {
		return nil, nil, fmt.Errorf("grader for %s: %w", domain, err)
	}
	var kept []*data.Task
	var left []leftOut
tasks:
	for _, t := range tasks {
		for _, v := range []goldgen.Variant{goldgen.Gold, goldgen.DropLastWrite, goldgen.ChangeArg, goldgen.NoActions} {
			if v != goldgen.Gold && !g.Applicable(t, v) {
				continue
			}
			run, err := g.Build(t, v, 0)
			if err != nil {
				left = append(left, leftOut{t.ID, fmt.Sprintf("its %s actions cannot be played: %v", v, err)})
				continue tasks
			}
			info, err := grader.Evaluate(context.Background(), t, run.Messages, run.Termination)
			switch {
			case errors.Is(err, evaluator.ErrEvaluation):
				left = append(left, leftOut{t.ID, fmt.Sprintf("τ²'s evaluator cannot grade an episode with the %s mistake (%v)", v, err)})
				continue tasks
			case err != nil:
				return nil, nil, fmt.Errorf("grading the %s actions of task %s: %w", v, t.ID, err)
			case v == goldgen.Gold && info.Reward == nil:
				left = append(left, leftOut{t.ID, "its reward needs the NL-assertion judge, which tau2-run does not run"})
				continue tasks
			}
		}
		kept = append(kept, t)
	}
	return kept, left, nil
}

// reportLeftOut says which tasks gradable set aside and why, one line per reason, so that a
// smaller task count or a missing task id is never a surprise.
func reportLeftOut(out io.Writer, domain, split string, left []leftOut) {
	if len(left) == 0 {
		return
	}
	fmt.Fprintf(out, "tau2-run: leaving out %d task(s) of %s/%s that this run cannot grade:\n", len(left), domain, split)
	var reasons []string
	ids := map[string][]string{}
	for _, l := range left {
		if _, ok := ids[l.why]; !ok {
			reasons = append(reasons, l.why)
		}
		ids[l.why] = append(ids[l.why], l.id)
	}
	for _, r := range reasons {
		fmt.Fprintf(out, "  %s: %s\n", strings.Join(ids[r], ", "), r)
	}
}

// runTasks is the task list of `tau2-run` (the pipeline): the split's gradable tasks, as a
// YAML list for admission.tasks[0].task_ids, or "" when every task of the split is gradable.
func runTasks(out io.Writer, dataDir, domain, split string) (string, error) {
	tasks, err := data.LoadSplit(dataDir, domain, data.Head, split)
	if err != nil {
		return "", fmt.Errorf("tasks of %s/%s: %w", domain, split, err)
	}
	kept, left, err := gradable(dataDir, domain, tasks)
	if err != nil {
		return "", err
	}
	reportLeftOut(out, domain, split, left)
	if len(kept) == 0 {
		return "", fmt.Errorf("none of the %d tasks of %s/%s can be graded without an NL judge", len(tasks), domain, split)
	}
	if len(left) == 0 {
		return "", nil
	}
	ids := make([]string, len(kept))
	for i, t := range kept {
		ids[i] = t.ID
	}
	return yamlList(ids), nil
}
