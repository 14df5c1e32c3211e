// Package goldgen builds realistic τ² trajectories and results files from
// tasks' gold actions, for tests and benchmarks of the evaluator and the
// grader: a canned greeting, the user's request, one tool-call message per
// gold action (assistant or user side, by requestor) each followed by the
// tool result computed on a live environment in the task's initial state,
// an assistant message carrying the communicate_info strings, and the
// user's ###STOP###. Variants mutate that script (a write dropped, an
// argument changed, only the writes, wrong communicate text, premature
// termination) the way a flawed agent would.
package goldgen

import (
	"crypto/sha1"
	"fmt"
	"strings"
	"time"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/pyjson"
)

// Greeting is τ²'s canned first agent message (tau2/data's one copy).
const Greeting = data.FirstAgentMessage

// Variant names a transcript mutation.
type Variant string

// The variants. Each documents what τ² gives it.
const (
	// Gold replays every gold action and communicates every info string:
	// 1 on DB, ENV_ASSERTION, ACTION and COMMUNICATE.
	Gold Variant = "gold"
	// DropLastWrite leaves out the last mutating gold action.
	DropLastWrite Variant = "drop_last_write"
	// ChangeArg alters one argument of the last mutating gold action.
	ChangeArg Variant = "change_arg"
	// WritesOnly keeps only the mutating gold actions (reads dropped).
	WritesOnly Variant = "writes_only"
	// WrongCommunicate replaces the communicated information.
	WrongCommunicate Variant = "wrong_communicate"
	// NoActions calls no tool at all.
	NoActions Variant = "no_actions"
	// MaxSteps is Gold ended by max_steps (premature: reward 0).
	MaxSteps Variant = "max_steps"
	// CommaNumbers communicates numbers with thousands separators
	// ("1,628" must match "1628").
	CommaNumbers Variant = "comma_numbers"
)

// Variants lists every variant, Gold first.
var Variants = []Variant{Gold, DropLastWrite, ChangeArg, WritesOnly, WrongCommunicate, NoActions, MaxSteps, CommaNumbers}

// Run is one generated simulation.
type Run struct {
	ID          string
	Task        *data.Task
	Variant     Variant
	Trial       int
	Messages    []evaluator.Message
	Termination string
}

// Generator builds runs for one domain.
type Generator struct {
	Domain  string
	DataDir string
	// Start is the first message's timestamp (default 2025-06-01 12:00 UTC).
	Start time.Time
}

// Applicable reports whether a variant changes anything for a task (e.g.
// DropLastWrite needs a mutating gold action).
func (g *Generator) Applicable(t *data.Task, v Variant) bool {
	crit := t.EvaluationCriteria
	if crit == nil {
		return v == Gold || v == MaxSteps
	}
	switch v {
	case DropLastWrite, ChangeArg, WritesOnly:
		e, err := env.New(g.Domain, env.Options{DataDir: g.DataDir})
		if err != nil {
			return false
		}
		i := lastWrite(e, crit.Actions)
		if i < 0 {
			return false
		}
		if v == ChangeArg {
			_, ok := changedArgs(crit.Actions[i].Arguments)
			return ok
		}
		return v != WritesOnly || len(writes(e, crit.Actions)) < len(crit.Actions)
	case WrongCommunicate, CommaNumbers:
		return len(crit.CommunicateInfo) > 0
	case NoActions:
		return len(crit.Actions) > 0
	}
	return true
}

// Build generates the run of one task variant.
func (g *Generator) Build(t *data.Task, v Variant, trial int) (*Run, error) {
	e, err := env.New(g.Domain, env.Options{DataDir: g.DataDir})
	if err != nil {
		return nil, fmt.Errorf("goldgen: %w", err)
	}
	if err := evaluator.InitializeEnv(e, t); err != nil {
		return nil, fmt.Errorf("goldgen: %w", err)
	}
	var msgs []evaluator.Message
	if st := t.InitialState; st != nil && st.MessageHistory != nil {
		l := make([]any, len(st.MessageHistory))
		for i, m := range st.MessageHistory {
			l[i] = m
		}
		hist, err := evaluator.ParseMessages(l)
		if err != nil {
			return nil, fmt.Errorf("goldgen: task %s: message_history: %w", t.ID, err)
		}
		if _, err := evaluator.ReplayTrajectory(e, hist, false); err != nil {
			return nil, fmt.Errorf("goldgen: task %s: %w", t.ID, err)
		}
		msgs = append(msgs, hist...)
	} else {
		msgs = append(msgs, evaluator.Message{Role: evaluator.RoleAssistant, Content: evaluator.Text(Greeting)})
	}
	msgs = append(msgs, evaluator.Message{Role: evaluator.RoleUser, Content: evaluator.Text(request(t))})

	var actions []data.Action
	var info []string
	if crit := t.EvaluationCriteria; crit != nil {
		actions = crit.Actions
		info = crit.CommunicateInfo
	}
	switch v {
	case DropLastWrite:
		if i := lastWrite(e, actions); i >= 0 {
			actions = append(append([]data.Action{}, actions[:i]...), actions[i+1:]...)
		}
	case ChangeArg:
		if i := lastWrite(e, actions); i >= 0 {
			actions = append([]data.Action{}, actions...)
			a := actions[i]
			a.Arguments, _ = changedArgs(a.Arguments)
			actions[i] = a
		}
	case WritesOnly:
		actions = writes(e, actions)
	case NoActions:
		actions = nil
	case WrongCommunicate:
		info = []string{"I could not find anything relevant"}
	case CommaNumbers:
		info = withThousandsSeparators(info)
	}
	for i, a := range actions {
		role := evaluator.RoleAssistant
		if a.Requestor == env.User {
			role = evaluator.RoleUser
		}
		id := fmt.Sprintf("call_%s_%d", shortHash(t.ID), i)
		args := pyjson.DeepCopy(a.Arguments)
		if args == nil {
			args = pyjson.NewObject()
		}
		msgs = append(msgs, evaluator.Message{Role: role, ToolCalls: []evaluator.ToolCall{{
			ID: id, Name: a.Name, Arguments: args, Requestor: a.Requestor}}})
		content, isErr := e.CallObject(a.Requestor, a.Name, pyjson.DeepCopy(args))
		msgs = append(msgs, evaluator.Message{Role: evaluator.RoleTool, ID: id, Content: &content,
			Requestor: a.Requestor, Error: isErr})
		if err := e.Sync(); err != nil {
			return nil, fmt.Errorf("goldgen: task %s: sync: %w", t.ID, err)
		}
	}
	final := "Thank you for your patience. Everything is done."
	if len(info) > 0 {
		final = "Here is what I found: " + strings.Join(info, " and ") + ". Is there anything else?"
	}
	msgs = append(msgs,
		evaluator.Message{Role: evaluator.RoleAssistant, Content: evaluator.Text(final)},
		evaluator.Message{Role: evaluator.RoleUser, Content: evaluator.Text("Thanks, that's all I needed. ###STOP###")})
	term := evaluator.TerminationUserStop
	if v == MaxSteps {
		term = evaluator.TerminationMaxSteps
	}
	return &Run{ID: RunID(g.Domain, t.ID, v, trial), Task: t, Variant: v, Trial: trial,
		Messages: msgs, Termination: term}, nil
}

// RunID is a deterministic UUID-shaped simulation id.
func RunID(domain, taskID string, v Variant, trial int) string {
	h := sha1.Sum([]byte(fmt.Sprintf("%s\x00%s\x00%s\x00%d", domain, taskID, v, trial)))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func shortHash(s string) string {
	h := sha1.Sum([]byte(s))
	return fmt.Sprintf("%x", h[:4])
}

func request(t *data.Task) string {
	in := t.UserScenario.Instructions
	if in.Structured != nil {
		return "Hi. " + in.Structured.ReasonForCall
	}
	return "Hi. I need some help."
}

func isWrite(e *env.Environment, name string) bool {
	tl, ok := e.LookupTool(name)
	return ok && tl.Mutates
}

func lastWrite(e *env.Environment, actions []data.Action) int {
	for i := len(actions) - 1; i >= 0; i-- {
		if isWrite(e, actions[i].Name) {
			return i
		}
	}
	return -1
}

func writes(e *env.Environment, actions []data.Action) []data.Action {
	var out []data.Action
	for _, a := range actions {
		if isWrite(e, a.Name) {
			out = append(out, a)
		}
	}
	return out
}

// changedArgs alters the first string (suffix "X") or number (+1)
// argument; nested values are left alone.
func changedArgs(args *pyjson.Object) (*pyjson.Object, bool) {
	if args == nil {
		return nil, false
	}
	out := pyjson.DeepCopy(args)
	for k, v := range out.All() {
		switch x := v.(type) {
		case string:
			out.Set(k, x+"X")
			return out, true
		case int64:
			out.Set(k, x+1)
			return out, true
		case float64:
			out.Set(k, x+1)
			return out, true
		}
	}
	return out, false
}

// withThousandsSeparators writes integers of 4+ digits as "1,628".
func withThousandsSeparators(info []string) []string {
	out := make([]string, len(info))
	for i, s := range info {
		digits := true
		for _, r := range s {
			digits = digits && r >= '0' && r <= '9'
		}
		if !digits || len(s) < 4 {
			out[i] = s
			continue
		}
		var b strings.Builder
		for j, r := range s {
			if j > 0 && (len(s)-j)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(r)
		}
		out[i] = b.String()
	}
	return out
}
