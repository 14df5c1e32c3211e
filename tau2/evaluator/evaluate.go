package evaluator

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// τ²'s TerminationReason values.
const (
	TerminationUserStop              = "user_stop"
	TerminationAgentStop             = "agent_stop"
	TerminationMaxSteps              = "max_steps"
	TerminationTimeout               = "timeout"
	TerminationTooManyErrors         = "too_many_errors"
	TerminationAgentError            = "agent_error"
	TerminationUserError             = "user_error"
	TerminationInfrastructureError   = "infrastructure_error"
	TerminationContextWindowExceeded = "context_window_exceeded"
	TerminationUnexpectedError       = "unexpected_error"
)

var terminationReasons = []string{
	TerminationUserStop, TerminationAgentStop, TerminationMaxSteps, TerminationTimeout,
	TerminationTooManyErrors, TerminationAgentError, TerminationUserError,
	TerminationInfrastructureError, TerminationContextWindowExceeded, TerminationUnexpectedError,
}

// ValidTermination reports whether r is one of τ²'s termination reasons.
func ValidTermination(r string) bool { return slices.Contains(terminationReasons, r) }

var knownRewardTypes = []data.RewardType{
	data.RewardDB, data.RewardEnvAssertion, data.RewardNLAssertion, data.RewardAction, data.RewardCommunicate,
}

// Options configure grading.
type Options struct {
	// Domain is the environment registry name: "airline", "retail",
	// "telecom", "telecom-workflow" or "mock" (the domain package must be
	// linked in, e.g. with a blank import).
	Domain string `yaml:"domain"`
	// DataDir is the τ² data directory ("" = TAU2_DATA_DIR or
	// ../shared/tau2-data).
	DataDir string `yaml:"data_dir"`
	// Solo grades a solo-mode episode (τ²'s llm_agent_solo + dummy_user).
	Solo bool `yaml:"solo"`
	// Strict makes replay fail when a replayed mutating tool call returns a
	// different result than the recorded tool message (τ²'s live grading,
	// strict_replay=True). False only counts such mismatches
	// (RewardInfo.ReplayMismatches), as `tau2 evaluate-trajs` does.
	Strict bool `yaml:"strict"`
	// Judge grades NL assertions; nil leaves NL_ASSERTION not evaluated.
	Judge Judge `yaml:"-"`
}

func evalErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrEvaluation, fmt.Sprintf(format, args...))
}

// Grader evaluates episodes of one domain. It caches, per task, the gold
// environment (initial state + gold actions), so grading many episodes of
// a task replays the gold actions once. A Grader belongs to one goroutine;
// use one per worker.
type Grader struct {
	opts      Options
	toolTypes map[string]env.ToolType
	gold      map[*data.Task]*env.Environment
}

// NewGrader checks that the domain can be built and prepares a Grader.
func NewGrader(opts Options) (*Grader, error) {
	tt, err := toolTypes(opts)
	if err != nil {
		return nil, err
	}
	return &Grader{opts: opts, toolTypes: tt, gold: map[*data.Task]*env.Environment{}}, nil
}

type toolTypesKey struct {
	domain, dataDir string
	solo            bool
}

var toolTypesCache sync.Map // toolTypesKey -> map[string]env.ToolType (read-only)

// toolTypes is τ²'s get_tool_types(env.tools) updated with the user
// tools' types, computed once per domain.
func toolTypes(opts Options) (map[string]env.ToolType, error) {
	key := toolTypesKey{opts.Domain, opts.DataDir, opts.Solo}
	if v, ok := toolTypesCache.Load(key); ok {
		return v.(map[string]env.ToolType), nil
	}
	e, err := env.New(opts.Domain, env.Options{DataDir: opts.DataDir, Solo: opts.Solo})
	if err != nil {
		return nil, fmt.Errorf("evaluator: %w", err)
	}
	tt := map[string]env.ToolType{}
	for _, t := range e.Agent.Toolkit.Tools() {
		tt[t.Name] = t.Type
	}
	for _, t := range e.User.Toolkit.Tools() {
		tt[t.Name] = t.Type
	}
	toolTypesCache.Store(key, tt)
	return tt, nil
}

// Evaluate grades one episode with a throwaway Grader; see Grader.Evaluate.
func Evaluate(ctx context.Context, task *data.Task, trajectory []Message, termination string, opts Options) (*RewardInfo, error) {
	g, err := NewGrader(opts)
	if err != nil {
		return nil, err
	}
	return g.Evaluate(ctx, task, trajectory, termination)
}

// Evaluate is τ²'s evaluate_simulation(EvaluationType.ALL) for a text-mode
// episode: trajectory is the full ordered message list (including the
// task's message_history), termination the episode's termination reason.
// Errors wrap ErrEvaluation (or come from the judge) and are never
// rewards.
func (g *Grader) Evaluate(ctx context.Context, task *data.Task, trajectory []Message, termination string) (*RewardInfo, error) {
	if task == nil {
		return nil, evalErr("nil task")
	}
	if !ValidTermination(termination) {
		return nil, evalErr("unknown termination reason %q", termination)
	}
	if termination != TerminationAgentStop && termination != TerminationUserStop {
		zero := 0.0
		return &RewardInfo{Reward: &zero,
			Info: note("Simulation terminated prematurely. Termination reason: " + termination)}, nil
	}
	crit := task.EvaluationCriteria
	if crit == nil {
		one := 1.0
		return &RewardInfo{Reward: &one, Info: note("No evaluation criteria")}, nil
	}
	for _, b := range crit.RewardBasis {
		if !slices.Contains(knownRewardTypes, b) {
			return nil, evalErr("task %s: unknown reward type %q in reward_basis", task.ID, b)
		}
	}
	basis := func(t data.RewardType) bool { return slices.Contains(crit.RewardBasis, t) }

	envPart, err := g.envCheck(task, trajectory)
	if err != nil {
		return nil, err
	}
	actionPart := g.actionCheck(crit, trajectory)
	commPart := communicateCheck(crit, trajectory)
	var nlPart *part
	nlSkipped := false
	if basis(data.RewardNLAssertion) {
		switch {
		case len(crit.NLAssertions) == 0 || g.opts.Judge != nil:
			if nlPart, err = nlCheck(ctx, g.opts.Judge, crit, trajectory); err != nil {
				return nil, err
			}
		default:
			nlSkipped = true
		}
	}

	reward := 1.0
	breakdown := []Component{}
	if basis(data.RewardDB) || basis(data.RewardEnvAssertion) {
		breakdown = append(breakdown, envPart.breakdown...)
		reward *= envPart.reward
	}
	if basis(data.RewardAction) {
		breakdown = append(breakdown, actionPart.breakdown...)
		reward *= actionPart.reward
	}
	if basis(data.RewardNLAssertion) && nlPart != nil {
		breakdown = append(breakdown, nlPart.breakdown...)
		reward *= nlPart.reward
	}
	if basis(data.RewardCommunicate) {
		breakdown = append(breakdown, commPart.breakdown...)
		reward *= commPart.reward
	}
	ri := &RewardInfo{
		DBCheck:           envPart.dbCheck,
		EnvAssertions:     envPart.envAssertions,
		ActionChecks:      actionPart.actionChecks,
		CommunicateChecks: commPart.communicateChecks,
		RewardBasis:       crit.RewardBasis,
		RewardBreakdown:   breakdown,
		ReplayMismatches:  envPart.mismatches,
	}
	info := pyjson.NewObject("env", objOrNil(envPart.info), "nl", nil,
		"communicate", objOrNil(commPart.info), "action", objOrNil(actionPart.info))
	if nlPart != nil {
		ri.NLAssertions = nlPart.nlAssertions
		info.Set("nl", objOrNil(nlPart.info))
	}
	if nlSkipped {
		info.Set("nl", note(NotEvaluatedNote))
		ri.NotEvaluated = []data.RewardType{data.RewardNLAssertion}
	}
	ri.Info = info
	// A zero from an evaluated component decides the product whatever the
	// judge would say; otherwise a skipped NL component leaves it open.
	if !nlSkipped || reward == 0 {
		ri.Reward = &reward
	}
	return ri, nil
}

// part is one evaluator's RewardInfo (τ²'s per-evaluator RewardInfo).
type part struct {
	reward            float64
	dbCheck           *DBCheck
	envAssertions     []EnvAssertionCheck
	actionChecks      []ActionCheck
	nlAssertions      []NLAssertionCheck
	communicateChecks []CommunicateCheck
	breakdown         []Component
	info              *pyjson.Object
	mismatches        int
}

func boolReward(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}
