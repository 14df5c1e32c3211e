package evaluator

import (
	"fmt"
	"slices"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// envCheck is τ²'s EnvironmentEvaluator.calculate_reward: the DB check and
// the env assertions.
func (g *Grader) envCheck(task *data.Task, trajectory []Message) (*part, error) {
	crit := task.EvaluationCriteria
	if crit.Actions == nil && crit.EnvAssertions == nil {
		return &part{reward: 1, dbCheck: &DBCheck{DBMatch: true, DBReward: 1},
			info: note("No expected actions or env assertions")}, nil
	}
	pred, err := g.newEnv(g.opts.Solo)
	if err != nil {
		return nil, err
	}
	if err := InitializeEnv(pred, task); err != nil {
		return nil, err
	}
	mismatches, err := ReplayTrajectory(pred, trajectory, g.opts.Strict)
	if err != nil {
		return nil, err
	}
	gold, err := g.goldEnv(task)
	if err != nil {
		return nil, err
	}
	same, err := env.SameState(gold, pred)
	if err != nil {
		return nil, evalErr("task %s: compare DBs: %v", task.ID, err)
	}
	dbReward := boolReward(same)
	p := &part{dbCheck: &DBCheck{DBMatch: same, DBReward: dbReward}, mismatches: mismatches,
		envAssertions: make([]EnvAssertionCheck, 0, len(crit.EnvAssertions))}
	assertReward := 1.0
	for i, a := range crit.EnvAssertions {
		met, err := pred.RunAssertion(a.EnvType, a.FuncName, copyArgs(a.Arguments), a.AssertValue)
		if err != nil {
			return nil, evalErr("task %s: env assertion %d (%s.%s): %v", task.ID, i, a.EnvType, a.FuncName, err)
		}
		p.envAssertions = append(p.envAssertions, EnvAssertionCheck{EnvAssertion: a, Met: met, Reward: boolReward(met)})
		assertReward *= boolReward(met)
	}
	p.reward = 1
	p.breakdown = []Component{}
	if slices.Contains(crit.RewardBasis, data.RewardDB) {
		p.breakdown = append(p.breakdown, Component{data.RewardDB, dbReward})
		p.reward *= dbReward
	}
	if slices.Contains(crit.RewardBasis, data.RewardEnvAssertion) {
		p.breakdown = append(p.breakdown, Component{data.RewardEnvAssertion, assertReward})
		p.reward *= assertReward
	}
	return p, nil
}

func (g *Grader) newEnv(solo bool) (*env.Environment, error) {
	e, err := env.New(g.opts.Domain, env.Options{DataDir: g.opts.DataDir, Solo: solo})
	if err != nil {
		return nil, evalErr("%v", err)
	}
	return e, nil
}

// goldEnv returns the task's gold environment, built once per Grader: a
// fresh (non-solo, as in τ²) environment in the task's initial state, its
// message_history replayed, then the gold actions applied with
// make_tool_call — no sync, errors ignored.
func (g *Grader) goldEnv(task *data.Task) (*env.Environment, error) {
	if e, ok := g.gold[task]; ok {
		return e, nil
	}
	e, err := g.newEnv(false)
	if err != nil {
		return nil, err
	}
	if err := InitializeEnv(e, task); err != nil {
		return nil, err
	}
	if st := task.InitialState; st != nil && st.MessageHistory != nil {
		hist, err := ParseMessages(anySlice(st.MessageHistory))
		if err != nil {
			return nil, evalErr("task %s: message_history: %v", task.ID, err)
		}
		if _, err := ReplayTrajectory(e, hist, g.opts.Strict); err != nil {
			return nil, fmt.Errorf("task %s: gold message_history: %w", task.ID, err)
		}
	}
	for _, a := range task.EvaluationCriteria.Actions {
		// Errors are ignored, as τ² only logs them.
		_, _ = e.MakeToolCall(a.Requestor, a.Name, copyArgs(a.Arguments))
	}
	g.gold[task] = e
	return e, nil
}

func anySlice[T any](l []T) []any {
	out := make([]any, len(l))
	for i, x := range l {
		out[i] = x
	}
	return out
}

// InitializeEnv runs the environment's TaskSetup hook (if any), applies a
// task's initialization_data and runs its
// initialization_actions (each followed by sync), the first two steps of
// τ²'s set_state. A failing initialization action is an evaluation error.
func InitializeEnv(e *env.Environment, task *data.Task) error {
	if e.TaskSetup != nil {
		if err := e.TaskSetup(e, task); err != nil {
			return evalErr("task %s: environment setup: %v", task.ID, err)
		}
	}
	st := task.InitialState
	if st == nil {
		return nil
	}
	if d := st.InitializationData; d != nil {
		if err := e.ApplyInitializationData(d.AgentData, d.UserData); err != nil {
			return evalErr("task %s: initialization_data: %v", task.ID, err)
		}
	}
	for i, a := range st.InitializationActions {
		if _, err := e.RunEnvFunction(a.EnvType, a.FuncName, copyArgs(a.Arguments)); err != nil {
			return evalErr("task %s: initialization action %d (%s.%s): %v", task.ID, i, a.EnvType, a.FuncName, err)
		}
	}
	return nil
}

// ReplayTrajectory is the message part of τ²'s set_state: it pairs every
// tool-call message with the tool messages that follow it (ids must
// match), re-executes the mutating calls of known tools through
// get_response (reads and unknown tool names are skipped), compares each
// result with the recorded one as json.loads values, and finally syncs. A
// mismatch is an error when strict, else counted. Structural problems
// (orphan tool message, missing or mismatched results, user messages in
// solo mode) are errors, as in τ².
func ReplayTrajectory(e *env.Environment, msgs []Message, strict bool) (mismatches int, err error) {
	type pair struct {
		call   *ToolCall
		result *Message
	}
	var pairs []pair
	for i := 0; i < len(msgs); {
		m := &msgs[i]
		i++
		if e.Solo && m.Role == RoleUser {
			return 0, evalErr("User messages are not allowed in solo mode")
		}
		if m.Role == RoleTool && m.ToolMessages == nil {
			return 0, evalErr("Tool message not expected. Tool messages should always follow a tool call.")
		}
		if !m.IsToolCall() {
			continue
		}
		for c := range m.ToolCalls {
			tc := &m.ToolCalls[c]
			if i >= len(msgs) {
				return 0, evalErr("Tool message expected. Got None.")
			}
			tm := &msgs[i]
			i++
			if tm.Role != RoleTool || tm.ToolMessages != nil {
				return 0, evalErr("Tool message expected. Got %s", pyClassName(tm))
			}
			if tc.ID != tm.ID {
				return 0, evalErr("Tool call id mismatch. Got %s and %s", tc.ID, tm.ID)
			}
			pairs = append(pairs, pair{tc, tm})
		}
	}
	for _, p := range pairs {
		if !e.HasTool(p.call.Name) || !e.IsMutating(p.call.Name) {
			continue
		}
		req := p.call.Requestor
		if req == "" {
			req = env.Assistant
		}
		var content string
		if p.call.Arguments != nil {
			content, _ = e.CallObject(req, p.call.Name, copyArgs(p.call.Arguments))
		} else {
			content, _ = e.Call(req, p.call.Name, p.call.RawArguments)
		}
		if p.result.Content == nil {
			// json.loads(None) raises TypeError in τ², aborting evaluation.
			return mismatches, evalErr("tool message %s has no content", p.result.ID)
		}
		if !pyEqual(loadsOrString(content), loadsOrString(*p.result.Content)) {
			if strict {
				return mismatches, evalErr("replayed tool call %s (id %s) returned %q, recorded %q",
					p.call.Name, p.call.ID, content, *p.result.Content)
			}
			mismatches++
		}
	}
	if err := e.Sync(); err != nil {
		return mismatches, evalErr("sync after replay: %v", err)
	}
	return mismatches, nil
}

// loadsOrString is τ²'s `try: json.loads(s) except JSONDecodeError: s`.
func loadsOrString(s string) any {
	v, err := pyjson.Loads(s)
	if err != nil {
		return s
	}
	return v
}

func pyClassName(m *Message) string {
	switch {
	case m.ToolMessages != nil:
		return "<class 'tau2.data_model.message.MultiToolMessage'>"
	case m.Role == RoleAssistant:
		return "<class 'tau2.data_model.message.AssistantMessage'>"
	case m.Role == RoleUser:
		return "<class 'tau2.data_model.message.UserMessage'>"
	case m.Role == RoleSystem:
		return "<class 'tau2.data_model.message.SystemMessage'>"
	}
	return "<class 'tau2.data_model.message.ToolMessage'>"
}
