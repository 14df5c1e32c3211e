package evaluator

import (
	"fmt"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// NotEvaluatedNote is info.nl of a RewardInfo whose NL_ASSERTION component
// could not be evaluated because no judge was configured.
const NotEvaluatedNote = "NL assertions not evaluated: no NL judge configured"

// RewardInfo is τ²'s RewardInfo (data_model/simulation.py). Nil pointers
// and nil slices are JSON null; empty non-nil slices are [].
type RewardInfo struct {
	// Reward is 0.0 or 1.0, or nil when a component of the reward basis was
	// not evaluated (see NotEvaluated): a distinct state, never a 0 or 1.
	Reward            *float64
	DBCheck           *DBCheck
	EnvAssertions     []EnvAssertionCheck
	ActionChecks      []ActionCheck
	NLAssertions      []NLAssertionCheck
	CommunicateChecks []CommunicateCheck
	RewardBasis       []data.RewardType
	// RewardBreakdown is the per-component reward of the basis members that
	// were evaluated, in τ²'s insertion order (DB, ENV_ASSERTION, ACTION,
	// NL_ASSERTION, COMMUNICATE). nil is JSON null.
	RewardBreakdown []Component
	// Info is τ²'s free-form info dict ({"note": …} or {"env", "nl",
	// "communicate", "action"}); nil is null.
	Info *pyjson.Object

	// NotEvaluated lists the reward-basis components that were not
	// evaluated (only NL_ASSERTION, without a judge). Not part of τ²'s JSON.
	NotEvaluated []data.RewardType
	// ReplayMismatches counts replayed mutating tool calls whose output
	// differed from the recorded tool message (only with Options.Strict
	// false; strict replay fails instead). Not part of τ²'s JSON.
	ReplayMismatches int
}

// Component is one reward_breakdown entry.
type Component struct {
	Type   data.RewardType
	Reward float64
}

// DBCheck is τ²'s DBCheck.
type DBCheck struct {
	DBMatch  bool
	DBReward float64
}

// EnvAssertionCheck is τ²'s EnvAssertionCheck.
type EnvAssertionCheck struct {
	EnvAssertion data.EnvAssertion
	Met          bool
	Reward       float64
}

// ActionCheck is τ²'s ActionCheck; ToolType is "" when the environment
// has no tool of the action's name (null).
type ActionCheck struct {
	Action       data.Action
	ActionMatch  bool
	ActionReward float64
	ToolType     env.ToolType
}

// NLAssertionCheck is τ²'s NLAssertionCheck.
type NLAssertionCheck struct {
	NLAssertion   string
	Met           bool
	Justification string
}

// CommunicateCheck is τ²'s CommunicateCheck.
type CommunicateCheck struct {
	Info          string
	Met           bool
	Justification string
}

// Evaluated reports whether every component of the reward basis was
// evaluated, i.e. Reward is a real 0 or 1.
func (r *RewardInfo) Evaluated() bool { return r.Reward != nil }

// Success is τ²'s is_successful: an evaluated reward within 1e-6 of 1.
func (r *RewardInfo) Success() bool {
	return r.Reward != nil && IsSuccessful(*r.Reward)
}

// IsSuccessful is τ²'s metrics is_successful(reward).
func IsSuccessful(reward float64) bool {
	return 1-1e-6 <= reward && reward <= 1+1e-6
}

// Breakdown returns the reward_breakdown value of one component.
func (r *RewardInfo) Breakdown(t data.RewardType) (float64, bool) {
	for _, c := range r.RewardBreakdown {
		if c.Type == t {
			return c.Reward, true
		}
	}
	return 0, false
}

// ToValue returns the RewardInfo as τ²'s model_dump(mode="json"): an
// ordered generic value for pyjson and the results writer.
func (r *RewardInfo) ToValue() *pyjson.Object {
	o := pyjson.NewObject()
	if r.Reward != nil {
		o.Set("reward", *r.Reward)
	} else {
		o.Set("reward", nil)
	}
	if r.DBCheck != nil {
		o.Set("db_check", pyjson.NewObject("db_match", r.DBCheck.DBMatch, "db_reward", r.DBCheck.DBReward))
	} else {
		o.Set("db_check", nil)
	}
	o.Set("env_assertions", listOrNil(r.EnvAssertions, func(c EnvAssertionCheck) any {
		return pyjson.NewObject("env_assertion", envAssertionValue(&c.EnvAssertion), "met", c.Met, "reward", c.Reward)
	}))
	o.Set("action_checks", listOrNil(r.ActionChecks, func(c ActionCheck) any {
		var tt any
		if c.ToolType != "" {
			tt = string(c.ToolType)
		}
		return pyjson.NewObject("action", actionValue(&c.Action), "action_match", c.ActionMatch,
			"action_reward", c.ActionReward, "tool_type", tt)
	}))
	o.Set("nl_assertions", listOrNil(r.NLAssertions, func(c NLAssertionCheck) any {
		return pyjson.NewObject("nl_assertion", c.NLAssertion, "met", c.Met, "justification", c.Justification)
	}))
	o.Set("communicate_checks", listOrNil(r.CommunicateChecks, func(c CommunicateCheck) any {
		return pyjson.NewObject("info", c.Info, "met", c.Met, "justification", c.Justification)
	}))
	o.Set("reward_basis", listOrNil(r.RewardBasis, func(t data.RewardType) any { return string(t) }))
	if r.RewardBreakdown != nil {
		b := pyjson.NewObject()
		for _, c := range r.RewardBreakdown {
			b.Set(string(c.Type), c.Reward)
		}
		o.Set("reward_breakdown", b)
	} else {
		o.Set("reward_breakdown", nil)
	}
	if r.Info != nil {
		o.Set("info", r.Info)
	} else {
		o.Set("info", nil)
	}
	return o
}

// MarshalJSON encodes the RewardInfo as pydantic's model_dump_json()
// (compact, UTF-8, τ²'s field order).
func (r *RewardInfo) MarshalJSON() ([]byte, error) {
	return AppendJSON(nil, r.ToValue(), JSONStyle{})
}

// String is the compact JSON form.
func (r *RewardInfo) String() string {
	b, err := r.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("<RewardInfo: %v>", err)
	}
	return string(b)
}

func listOrNil[T any](l []T, f func(T) any) any {
	if l == nil {
		return nil
	}
	out := make([]any, len(l))
	for i, x := range l {
		out[i] = f(x)
	}
	return out
}

func strOrNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func objOrNil(o *pyjson.Object) any {
	if o == nil {
		return nil
	}
	return o
}

// actionValue is model_dump() of τ²'s Action.
func actionValue(a *data.Action) *pyjson.Object {
	return pyjson.NewObject("action_id", a.ActionID, "requestor", a.Requestor, "name", a.Name,
		"arguments", objOrNil(a.Arguments), "info", strOrNil(a.Info),
		"compare_args", listOrNil(a.CompareArgs, func(s string) any { return s }))
}

// envAssertionValue is model_dump() of τ²'s EnvAssertion.
func envAssertionValue(a *data.EnvAssertion) *pyjson.Object {
	return pyjson.NewObject("env_type", a.EnvType, "func_name", a.FuncName,
		"arguments", objOrNil(a.Arguments), "assert_value", a.AssertValue, "message", strOrNil(a.Message))
}

// note builds {"note": text}.
func note(text string) *pyjson.Object { return pyjson.NewObject("note", text) }
