package telecom

import (
	"fmt"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
)

// InitTask puts a fresh environment into a task's initial state as τ²'s
// set_state does: initialization_data merged into the DBs, then every
// initialization action run by name (each followed by sync_tools).
func InitTask(e *env.Environment, t *data.Task) error {
	st := t.InitialState
	if st == nil {
		return nil
	}
	if st.InitializationData != nil {
		if err := e.ApplyInitializationData(st.InitializationData.AgentData, st.InitializationData.UserData); err != nil {
			return fmt.Errorf("telecom: task %s: initialization_data: %w", t.ID, err)
		}
	}
	for i, a := range st.InitializationActions {
		if _, err := e.RunEnvFunction(a.EnvType, a.FuncName, a.Arguments); err != nil {
			return fmt.Errorf("telecom: task %s: initialization action %d (%s.%s): %w", t.ID, i, a.EnvType, a.FuncName, err)
		}
	}
	return nil
}

// ReplayGold runs a task's gold actions as a transcript would: each call
// through get_response (tool, then sync_tools), in order, by its requestor,
// followed by set_state's final sync. It returns the tool messages' error
// flags so callers can tell a gold action that errored.
func ReplayGold(e *env.Environment, t *data.Task) ([]bool, error) {
	if t.EvaluationCriteria == nil {
		return nil, nil
	}
	errs := make([]bool, len(t.EvaluationCriteria.Actions))
	for i, a := range t.EvaluationCriteria.Actions {
		_, isErr := e.CallObject(a.Requestor, a.Name, a.Arguments)
		errs[i] = isErr
	}
	if err := e.Sync(); err != nil {
		return errs, fmt.Errorf("telecom: task %s: final sync: %w", t.ID, err)
	}
	return errs, nil
}

// AssertionResult is one env assertion's outcome.
type AssertionResult struct {
	FuncName string
	Met      bool
}

// CheckAssertions runs a task's env assertions on e (τ²'s ENV_ASSERTION
// component); an assertion function that fails is an error, never "not met".
func CheckAssertions(e *env.Environment, t *data.Task) ([]AssertionResult, error) {
	if t.EvaluationCriteria == nil {
		return nil, nil
	}
	out := make([]AssertionResult, 0, len(t.EvaluationCriteria.EnvAssertions))
	for _, a := range t.EvaluationCriteria.EnvAssertions {
		met, err := e.RunAssertion(a.EnvType, a.FuncName, a.Arguments, a.AssertValue)
		if err != nil {
			return out, fmt.Errorf("telecom: task %s: env assertion %s.%s: %w", t.ID, a.EnvType, a.FuncName, err)
		}
		out = append(out, AssertionResult{FuncName: a.FuncName, Met: met})
	}
	return out, nil
}
