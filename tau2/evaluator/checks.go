package evaluator

import (
	"strings"

	"tau2rl/tau2/data"
	"tau2rl/tau2/pyjson"
)

// actionCheck is τ²'s ActionEvaluator.calculate_reward.
func (g *Grader) actionCheck(crit *data.EvaluationCriteria, trajectory []Message) *part {
	if len(crit.Actions) == 0 {
		return &part{reward: 1, info: note("No actions to evaluate"),
			breakdown: []Component{{data.RewardAction, 1}}}
	}
	var calls []*ToolCall
	for i := range trajectory {
		m := &trajectory[i]
		if m.IsToolCall() {
			for c := range m.ToolCalls {
				calls = append(calls, &m.ToolCalls[c])
			}
		}
	}
	checks := make([]ActionCheck, len(crit.Actions))
	all := true
	for i := range crit.Actions {
		a := &crit.Actions[i]
		found := false
		for _, c := range calls {
			if ActionMatches(a, c) {
				found = true
				break
			}
		}
		all = all && found
		checks[i] = ActionCheck{Action: *a, ActionMatch: found, ActionReward: boolReward(found), ToolType: g.toolTypes[a.Name]}
	}
	r := boolReward(all)
	return &part{reward: r, actionChecks: checks, breakdown: []Component{{data.RewardAction, r}}}
}

// ActionMatches is τ²'s Action.compare_with_tool_call: same name; the
// compared keys are compare_args, or (compare_args null) all keys of the
// call's arguments; an empty key list matches; otherwise the two argument
// dicts restricted to those keys must be equal under Python ==. The
// requestor is not compared. A call whose arguments could not be decoded
// (Arguments nil) matches only an action with compare_args [].
func ActionMatches(a *data.Action, c *ToolCall) bool {
	if a.Name != c.Name {
		return false
	}
	keys := a.CompareArgs
	if keys == nil {
		if c.Arguments == nil {
			return false
		}
		keys = c.Arguments.Keys()
	}
	if len(keys) == 0 {
		return true
	}
	if c.Arguments == nil {
		return false
	}
	return pyEqual(restrict(c.Arguments, keys), restrict(a.Arguments, keys))
}

// restrict is {k: v for k, v in args.items() if k in keys}.
func restrict(args *pyjson.Object, keys []string) *pyjson.Object {
	out := pyjson.NewObject()
	if args == nil {
		return out
	}
	for k, v := range args.All() {
		for _, want := range keys {
			if k == want {
				out.Set(k, v)
				break
			}
		}
	}
	return out
}

// communicateCheck is τ²'s CommunicateEvaluator.calculate_reward.
func communicateCheck(crit *data.EvaluationCriteria, trajectory []Message) *part {
	if len(crit.CommunicateInfo) == 0 {
		return &part{reward: 1, info: note("No communicate_info to evaluate"),
			breakdown: []Component{{data.RewardCommunicate, 1}}}
	}
	// Lower-cased, comma-free assistant texts, computed once.
	type text struct{ raw, folded string }
	var texts []text
	for i := range trajectory {
		m := &trajectory[i]
		if m.Role == RoleAssistant && m.ToolMessages == nil && m.HasTextContent() {
			texts = append(texts, text{*m.Content, strings.ReplaceAll(pyjson.Lower(*m.Content), ",", "")})
		}
	}
	checks := make([]CommunicateCheck, len(crit.CommunicateInfo))
	all := true
	for i, info := range crit.CommunicateInfo {
		want := pyjson.Lower(info)
		c := CommunicateCheck{Info: info, Justification: "Information '" + info + "' not communicated."}
		for _, t := range texts {
			if strings.Contains(t.folded, want) {
				c.Met = true
				c.Justification = "Information '" + info + "' communicated in the message:\n '" + t.raw + "'"
				break
			}
		}
		all = all && c.Met
		checks[i] = c
	}
	r := boolReward(all)
	return &part{reward: r, communicateChecks: checks, breakdown: []Component{{data.RewardCommunicate, r}}}
}
