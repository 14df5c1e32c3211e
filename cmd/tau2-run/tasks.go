package main

import (
	"fmt"
	"strconv"
	"strings"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"

	// Every τ² domain registers itself with the environment registry: the write-task
	// selection asks a domain's toolkit which expected actions change its database.
	_ "tau2rl/tau2/domains"
)

// selectTasks resolves the experiment's tasks once, so that every stage — demonstrations,
// SFT (through the demonstrations), evaluation and GRPO's admission — sees the same list: the
// split's tasks in file order, restricted to task_ids when set, to the tasks with a
// state-changing expected action when write_tasks_only is set, and to the first 'tasks' of
// what is left.
func selectTasks(cfg expConfig) ([]string, error) {
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
