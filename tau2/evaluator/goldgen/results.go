package goldgen

import (
	"fmt"
	"time"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/pyjson"
)

// tsLayout is τ²'s get_now() format (datetime.now().isoformat()).
const tsLayout = "2006-01-02T15:04:05.000000"

// Results renders runs as a τ² results file (Results.save "json" format,
// pydantic's model_dump_json(indent=2) layout): info as `tau2 run` writes
// it, the tasks as given, one SimulationRun per run with reward_info null.
func (g *Generator) Results(tasks []*data.Task, runs []*Run, numTrials int) ([]byte, error) {
	e, err := env.New(g.Domain, env.Options{DataDir: g.DataDir})
	if err != nil {
		return nil, fmt.Errorf("goldgen: %w", err)
	}
	start := g.Start
	if start.IsZero() {
		start = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	}
	llmArgs := func() *pyjson.Object { return pyjson.NewObject("temperature", 0.0) }
	info := pyjson.NewObject(
		"git_commit", "a2c024725189473d2d7cea3a5cfdbcc67478e41f",
		"num_trials", int64(numTrials),
		"max_steps", int64(200),
		"max_errors", int64(10),
		"user_info", pyjson.NewObject("implementation", "user_simulator", "llm", "gpt-4.1-2025-04-14",
			"llm_args", llmArgs(), "global_simulation_guidelines", nil),
		"agent_info", pyjson.NewObject("implementation", "llm_agent", "llm", "gpt-4.1-2025-04-14",
			"llm_args", llmArgs()),
		"environment_info", pyjson.NewObject("domain_name", g.Domain, "policy", e.Policy, "tool_defs", nil),
		"seed", int64(300),
	)
	tl := make([]any, len(tasks))
	for i, t := range tasks {
		if t.Raw == nil {
			return nil, fmt.Errorf("goldgen: task %s has no raw form", t.ID)
		}
		tl[i] = t.Raw
	}
	sims := make([]any, len(runs))
	for i, r := range runs {
		t0 := start.Add(time.Duration(i) * time.Minute)
		msgs := make([]any, len(r.Messages))
		for j, m := range r.Messages {
			msgs[j] = MessageValue(&m, j, t0.Add(time.Duration(j)*time.Second).Format(tsLayout))
		}
		end := t0.Add(time.Duration(len(r.Messages)) * time.Second)
		sims[i] = pyjson.NewObject(
			"id", r.ID,
			"task_id", r.Task.ID,
			"timestamp", end.Format(tsLayout),
			"start_time", t0.Format(tsLayout),
			"end_time", end.Format(tsLayout),
			"duration", end.Sub(t0).Seconds(),
			"termination_reason", r.Termination,
			"agent_cost", 0.0123,
			"user_cost", 0.0045,
			"reward_info", nil,
			"messages", msgs,
			"trial", int64(r.Trial),
			"seed", int64(1000+r.Trial),
		)
	}
	doc := pyjson.NewObject("timestamp", start.Format(tsLayout), "info", info, "tasks", tl, "simulations", sims)
	return evaluator.AppendJSON(nil, doc, evaluator.JSONStyle{Indent: 2})
}

// MessageValue is a message as τ² stores it in a trajectory
// (model_dump of AssistantMessage / UserMessage / ToolMessage).
func MessageValue(m *evaluator.Message, turn int, ts string) *pyjson.Object {
	content := any(nil)
	if m.Content != nil {
		content = *m.Content
	}
	if m.Role == evaluator.RoleTool {
		req := m.Requestor
		if req == "" {
			req = env.Assistant
		}
		return pyjson.NewObject("id", m.ID, "role", m.Role, "content", content, "requestor", req,
			"error", m.Error, "turn_idx", int64(turn), "timestamp", ts)
	}
	var calls any
	if m.ToolCalls != nil {
		l := make([]any, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			req := c.Requestor
			if req == "" {
				req = env.Assistant
			}
			var args any = pyjson.NewObject()
			if c.Arguments != nil {
				args = c.Arguments
			}
			l[i] = pyjson.NewObject("id", c.ID, "name", c.Name, "arguments", args, "requestor", req)
		}
		calls = l
	}
	var cost any
	if m.Role == evaluator.RoleAssistant || m.Role == evaluator.RoleUser {
		cost = 0.0
	}
	return pyjson.NewObject("role", m.Role, "content", content, "tool_calls", calls,
		"turn_idx", int64(turn), "timestamp", ts, "cost", cost, "usage", nil, "raw_data", nil)
}
