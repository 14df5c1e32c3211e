package data

import (
	"fmt"
	"strings"

	"tau2rl/tau2/pyjson"
)

// RewardType is a component of a task's reward_basis.
type RewardType string

// τ²'s RewardType values.
const (
	RewardDB           RewardType = "DB"
	RewardEnvAssertion RewardType = "ENV_ASSERTION"
	RewardNLAssertion  RewardType = "NL_ASSERTION"
	RewardAction       RewardType = "ACTION"
	RewardCommunicate  RewardType = "COMMUNICATE"
)

// Task is τ²'s Task (src/tau2/data_model/tasks.py). Optional fields are nil
// when absent or null; list fields distinguish null (nil) from [] (empty,
// non-nil), which τ²'s evaluator does. Raw keeps the task object as read,
// for writing results back unchanged.
type Task struct {
	ID                 string              `json:"id"`
	Description        *Description        `json:"description"`
	UserScenario       UserScenario        `json:"user_scenario"`
	Ticket             *string             `json:"ticket"`
	InitialState       *InitialState       `json:"initial_state"`
	EvaluationCriteria *EvaluationCriteria `json:"evaluation_criteria"`
	Issues             []*pyjson.Object    `json:"issues" pydantic:"optional"`
	RequiredDocuments  []string            `json:"required_documents" pydantic:"optional"`
	UserTools          []string            `json:"user_tools" pydantic:"optional"`

	Raw *pyjson.Object `json:"-"`
}

// Description is a task's description (never shown to agent or user).
type Description struct {
	Purpose          *string `json:"purpose"`
	RelevantPolicies *string `json:"relevant_policies"`
	Notes            *string `json:"notes"`
}

// UserScenario is what the user simulator is told.
type UserScenario struct {
	Persona      *string      `json:"persona"`
	Instructions Instructions `json:"instructions"`
}

// Instructions is `str | StructuredUserInstructions`: Text is set for the
// plain string form, Structured otherwise.
type Instructions struct {
	Text       string
	Structured *StructuredInstructions
}

// StructuredInstructions is τ²'s StructuredUserInstructions.
type StructuredInstructions struct {
	Domain           string  `json:"domain"`
	ReasonForCall    string  `json:"reason_for_call"`
	KnownInfo        *string `json:"known_info"`
	UnknownInfo      *string `json:"unknown_info"`
	TaskInstructions string  `json:"task_instructions"`
}

// UnmarshalPy accepts a string or a structured-instructions object.
func (in *Instructions) UnmarshalPy(v any) error {
	if s, ok := v.(string); ok {
		*in = Instructions{Text: s}
		return nil
	}
	var st StructuredInstructions
	if err := pyjson.FromValue(v, &st); err != nil {
		return err
	}
	*in = Instructions{Structured: &st}
	return nil
}

// MarshalPy dumps the instructions as τ² does (string or model).
func (in Instructions) MarshalPy() (any, error) {
	if in.Structured != nil {
		return in.Structured, nil
	}
	return in.Text, nil
}

// indent is Python's textwrap.indent(s, prefix): prefix every line that is
// not whitespace-only.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			b.WriteString(prefix)
		}
		b.WriteString(l)
	}
	return b.String()
}

// String renders the instructions like τ²'s str(StructuredUserInstructions).
func (in Instructions) String() string {
	if in.Structured == nil {
		return in.Text
	}
	s := in.Structured
	lines := []string{"Domain: " + s.Domain, "Reason for call:\n" + indent(s.ReasonForCall, "\t")}
	if s.KnownInfo != nil {
		lines = append(lines, "Known info:\n"+indent(*s.KnownInfo, "\t"))
	}
	if s.UnknownInfo != nil {
		lines = append(lines, "Unknown info:\n"+indent(*s.UnknownInfo, "\t"))
	}
	lines = append(lines, "Task instructions:\n"+indent(s.TaskInstructions, "\t"))
	return strings.Join(lines, "\n")
}

// String renders the scenario like τ²'s str(UserScenario), the text inside
// the user simulator's <scenario> tag.
func (u UserScenario) String() string {
	var lines []string
	if u.Persona != nil {
		lines = append(lines, "Persona:", indent(*u.Persona, "\t"))
	}
	lines = append(lines, "Instructions:", indent(u.Instructions.String(), "\t"))
	return strings.Join(lines, "\n")
}

// InitialState is a task's initial_state.
type InitialState struct {
	InitializationData    *InitializationData `json:"initialization_data"`
	InitializationActions []EnvFunctionCall   `json:"initialization_actions" pydantic:"optional"`
	// MessageHistory holds the pre-existing conversation as raw message
	// objects (message schema of τ²'s data_model/message.py).
	MessageHistory []*pyjson.Object `json:"message_history" pydantic:"optional"`
}

// InitializationData is deep-merged into the DBs before the episode.
type InitializationData struct {
	AgentData *pyjson.Object `json:"agent_data"`
	UserData  *pyjson.Object `json:"user_data"`
}

// EnvFunctionCall is a call of a toolkit function by name.
type EnvFunctionCall struct {
	EnvType   string         `json:"env_type"` // "user" or "assistant"
	FuncName  string         `json:"func_name"`
	Arguments *pyjson.Object `json:"arguments"`
}

// EnvAssertion is an EnvFunctionCall whose bool result is compared with
// AssertValue.
type EnvAssertion struct {
	EnvFunctionCall
	AssertValue bool    `json:"assert_value" pydantic:"optional"`
	Message     *string `json:"message"`
}

// SetDefaults sets assert_value's default (True).
func (a *EnvAssertion) SetDefaults() { a.AssertValue = true }

// Action is a gold tool call.
type Action struct {
	ActionID    string         `json:"action_id"`
	Requestor   string         `json:"requestor" pydantic:"optional"`
	Name        string         `json:"name"`
	Arguments   *pyjson.Object `json:"arguments"`
	Info        *string        `json:"info"`
	CompareArgs []string       `json:"compare_args" pydantic:"optional"`
}

// SetDefaults sets requestor's default ("assistant").
func (a *Action) SetDefaults() { a.Requestor = "assistant" }

// EvaluationCriteria is a task's evaluation_criteria.
type EvaluationCriteria struct {
	Actions         []Action       `json:"actions" pydantic:"optional"`
	EnvAssertions   []EnvAssertion `json:"env_assertions" pydantic:"optional"`
	CommunicateInfo []string       `json:"communicate_info" pydantic:"optional"`
	NLAssertions    []string       `json:"nl_assertions" pydantic:"optional"`
	RewardBasis     []RewardType   `json:"reward_basis" pydantic:"optional"`
}

// SetDefaults sets reward_basis's default [DB, COMMUNICATE] (v0.2.1 files
// have no reward_basis key).
func (c *EvaluationCriteria) SetDefaults() {
	c.RewardBasis = []RewardType{RewardDB, RewardCommunicate}
}

// ParseTasks validates a task file's content (a JSON list of tasks).
func ParseTasks(text string) ([]*Task, error) {
	v, err := pyjson.Loads(text)
	if err != nil {
		return nil, fmt.Errorf("data: tasks: %w", err)
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("data: tasks: expected a JSON list, got %s", pyjson.TypeName(v))
	}
	out := make([]*Task, 0, len(l))
	seen := make(map[string]bool, len(l))
	for i, tv := range l {
		t, err := ParseTask(tv)
		if err != nil {
			return nil, fmt.Errorf("data: task #%d: %w", i, err)
		}
		if seen[t.ID] {
			return nil, fmt.Errorf("data: duplicate task id %q", t.ID)
		}
		seen[t.ID] = true
		out = append(out, t)
	}
	return out, nil
}

// ParseTask validates one decoded task object.
func ParseTask(v any) (*Task, error) {
	t := &Task{}
	if err := pyjson.FromValue(v, t); err != nil {
		return nil, err
	}
	t.Raw, _ = v.(*pyjson.Object)
	return t, nil
}
