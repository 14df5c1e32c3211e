package episode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"tau2rl/lib/redact"
	"tau2rl/schemas"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/evaluator"
)

// Infrastructure-failure stages (schemas.InfraError.Stage).
const (
	StagePolicy      = "policy_llm"
	StageUser        = "user_llm"
	StageEnvironment = "environment"
	StageEvaluator   = "evaluator"
	StageTimeout     = "timeout"
	StageCanceled    = "canceled"
)

// InfraError is an infrastructure failure that ended an episode: never a
// reward.
type InfraError struct {
	Stage string
	Err   error
}

// Error is the failure with credentials redacted (lib/redact): it is stored in the trajectory's
// error column and in results files' info.error, and a failing server's message may quote the
// key it was sent.
//
// The stage names the package that failed ("evaluator"), and that package's own errors already
// start with its name, so the stage is written once: "episode: evaluator: NL judge: …", not
// "episode: evaluator: evaluator: NL judge: …".
func (e *InfraError) Error() string {
	msg := e.Err.Error()
	if !strings.HasPrefix(msg, e.Stage+": ") {
		msg = e.Stage + ": " + msg
	}
	return redact.String("episode: " + msg)
}
func (e *InfraError) Unwrap() error { return e.Err }

// Runner runs episodes. It is safe for concurrent use: every episode gets
// its own environment, agent and user.
type Runner struct {
	Config Config
	// DataDir is the τ² data directory ("" = TAU2_DATA_DIR or
	// ../shared/tau2-data).
	DataDir string
	Agents  AgentFactory
	// Users builds user simulators (unused in solo mode).
	Users  UserFactory
	Grader Grader
	// AgentModel and UserModel are recorded in trajectories.
	AgentModel, UserModel string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Input describes one episode.
type Input struct {
	Task      *data.Task
	Split     string
	ID        string
	RequestID string
	Trial     int
	Seed      int64
	// PolicyVersion is the version believed current at the start.
	PolicyVersion int64
	Sampling      schemas.SamplingParams
	Tags          map[string]string
}

// Stats describe an episode for metrics.
type Stats struct {
	Steps, ToolErrors              int
	PromptTokens, CompletionTokens int
	AgentLatencies, UserLatencies  []time.Duration
}

// Result is a finished episode. Infra is non-nil when it ended with an
// infrastructure failure; Traj is then the partial episode with Status
// infra_error.
type Result struct {
	Traj  *schemas.Trajectory
	Infra *InfraError
	Stats Stats
}

type role int

const (
	roleAgent role = iota
	roleUser
	roleEnv
)

type run struct {
	r     *Runner
	in    Input
	env   *env.Environment
	agent Agent
	user  User
	traj  *schemas.Trajectory
	stats Stats
	from  role
	to    role
	// resumed is set for a task with a message_history.
	resumed *resumption
	pending []schemas.Message
	done    bool
	errors  int
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

// Run runs one episode to its end and grades it. The context bounds it
// together with Config.Timeout; cancellation or timeout is an
// infrastructure failure (stage canceled or timeout).
func (r *Runner) Run(ctx context.Context, in Input) *Result {
	ctx, cancel := context.WithTimeout(ctx, r.Config.Timeout)
	defer cancel()
	ru := &run{r: r, in: in}
	ru.traj = &schemas.Trajectory{
		ID: in.ID, TaskID: in.Task.ID, Domain: r.Config.Domain, Split: in.Split, RequestID: in.RequestID,
		Trial: in.Trial, Seed: in.Seed, StartedAt: r.now(), PolicyVersionStart: in.PolicyVersion,
		AgentModel: r.AgentModel, UserModel: r.UserModel, Tags: in.Tags, Status: schemas.StatusOK,
	}
	if r.Config.SoloMode {
		ru.traj.UserModel = ""
	}
	err := ru.play(ctx)
	if err == nil {
		err = ru.grade(ctx)
	}
	ru.traj.EndedAt = r.now()
	res := &Result{Traj: ru.traj, Stats: ru.stats}
	if err != nil {
		ie := classify(ctx, err)
		res.Infra = ie
		ru.traj.Status = schemas.StatusInfraError
		ru.traj.Error = ie.Error()
		ru.traj.Termination = schemas.TerminationInfrastructureError
		ru.traj.Reward, ru.traj.RewardBasis, ru.traj.Breakdown, ru.traj.RewardInfoJSON = 0, nil, schemas.RewardBreakdown{}, ""
	}
	return res
}

// classify turns an error into an infrastructure failure with its stage;
// context endings win over the stage the error came from.
func classify(ctx context.Context, err error) *InfraError {
	var ie *InfraError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(context.Cause(ctx), context.Canceled):
		return &InfraError{Stage: StageTimeout, Err: err}
	case ctx.Err() != nil:
		return &InfraError{Stage: StageCanceled, Err: err}
	case errors.As(err, &ie):
		return ie
	}
	return &InfraError{Stage: StageEnvironment, Err: err}
}

// setup builds the environment in the task's initial state, the agent and
// the user.
func (ru *run) setup() error {
	cfg := &ru.r.Config
	task := ru.in.Task
	hist, err := parseHistory(task)
	if err != nil {
		return &InfraError{Stage: StageEnvironment, Err: err}
	}
	e, err := env.New(cfg.Domain, env.Options{DataDir: ru.r.DataDir, Solo: cfg.SoloMode, Retrieval: cfg.RetrievalConfig,
		EmbeddingsURL: cfg.EmbeddingsURL, EmbeddingsModel: cfg.EmbeddingsModel})
	if err != nil {
		return &InfraError{Stage: StageEnvironment, Err: err}
	}
	// τ²'s set_state: initialization_data, initialization_actions, then the
	// message_history's mutating tool calls replayed (strict: a result that
	// differs from the recorded one is an error).
	if err := evaluator.InitializeEnv(e, task); err != nil {
		return &InfraError{Stage: StageEnvironment, Err: err}
	}
	if hist != nil {
		if _, err := evaluator.ReplayTrajectory(e, hist, true); err != nil {
			return &InfraError{Stage: StageEnvironment, Err: fmt.Errorf("task %s: message_history replay: %w", task.ID, err)}
		}
		if err := validateHistory(hist); err != nil {
			return &InfraError{Stage: StageEnvironment, Err: fmt.Errorf("task %s: %w", task.ID, err)}
		}
		if ru.resumed, err = newResumption(hist, cfg.SoloMode, ru.r.now()); err != nil {
			return &InfraError{Stage: StageEnvironment, Err: fmt.Errorf("task %s: %w", task.ID, err)}
		}
	}
	ru.env = e
	var tools []json.RawMessage
	for _, t := range e.Tools() {
		tools = append(tools, json.RawMessage(t.Schema))
	}
	if cfg.AddThinkingTool {
		tools = append(tools, ThinkToolSchema())
	}
	tag := Tag{Episode: ru.in.ID, Domain: cfg.Domain, TaskID: task.ID}
	spec := AgentSpec{Tools: tools, Sampling: ru.in.Sampling, Seed: ru.in.Seed, Tag: tag}
	if cfg.SoloMode {
		spec.System = SoloSystemPrompt(e.Policy, task.Ticket)
		spec.Tools = append(spec.Tools, DoneToolSchema())
		spec.ToolChoiceRequired = true
	} else {
		spec.System = AgentSystemPrompt(e.Policy)
	}
	switch {
	case ru.resumed != nil:
		spec.History = ru.resumed.agentView
	case !cfg.SoloMode:
		spec.Initial = []schemas.Message{{Role: schemas.RoleAssistant, Content: Greeting, CallIndex: -1}}
	}
	if ru.agent, err = ru.r.Agents.NewAgent(spec); err != nil {
		return &InfraError{Stage: StagePolicy, Err: err}
	}
	if cfg.SoloMode {
		return nil
	}
	if ru.r.Users == nil {
		return &InfraError{Stage: StageUser, Err: errors.New("no user simulator configured")}
	}
	var userTools []json.RawMessage
	for _, t := range e.UserTools() {
		userTools = append(userTools, json.RawMessage(t.Schema))
	}
	dir, err := data.Dir(ru.r.DataDir)
	if err != nil {
		return &InfraError{Stage: StageEnvironment, Err: err}
	}
	sys, err := UserSystemPrompt(dir, task, len(userTools) > 0)
	if err != nil {
		return &InfraError{Stage: StageEnvironment, Err: err}
	}
	uspec := UserSpec{System: sys, Tools: userTools, Seed: ru.in.Seed, Tag: tag}
	if ru.resumed != nil {
		uspec.History = ru.resumed.userView
	}
	if ru.user, err = ru.r.Users.NewUser(uspec); err != nil {
		return &InfraError{Stage: StageUser, Err: err}
	}
	return nil
}

func (ru *run) append(m schemas.Message) {
	m.Turn = len(ru.traj.Messages)
	if m.Timestamp.IsZero() {
		m.Timestamp = ru.r.now()
	}
	ru.traj.Messages = append(ru.traj.Messages, m)
}

// play runs τ²'s initialize + step loop.
func (ru *run) play(ctx context.Context) error {
	if err := ru.setup(); err != nil {
		return err
	}
	cfg := &ru.r.Config
	if res := ru.resumed; res != nil {
		// τ²: the trajectory starts with the history; the routing resumes
		// from its last message, outside the step count.
		for _, m := range res.msgs {
			ru.append(m)
		}
		ru.pending = res.pending
		ru.from, ru.to = res.from, res.to
		if res.termination != "" {
			ru.finish(res.termination)
		}
	} else if cfg.SoloMode {
		// τ²: the solo agent speaks first, outside the step count.
		if err := ru.agentStep(ctx, nil); err != nil {
			return err
		}
	} else {
		g := schemas.Message{Role: schemas.RoleAssistant, Content: Greeting, CallIndex: -1}
		ru.append(g)
		ru.pending = []schemas.Message{g}
		ru.from, ru.to = roleAgent, roleUser
	}
	if err := ru.env.Sync(); err != nil {
		return &InfraError{Stage: StageEnvironment, Err: err}
	}
	for !ru.done {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ru.step(ctx); err != nil {
			return err
		}
		if ru.done || ru.to == roleEnv {
			continue
		}
		if ru.stats.Steps >= cfg.MaxSteps {
			ru.finish(schemas.TerminationMaxSteps)
		}
		if ru.errors >= cfg.MaxErrors {
			ru.finish(schemas.TerminationTooManyErrors)
		}
	}
	return nil
}

func (ru *run) finish(reason string) {
	ru.done = true
	ru.traj.Termination = reason
}

// step is τ²'s Orchestrator.step.
func (ru *run) step(ctx context.Context) error {
	switch {
	case ru.to == roleUser:
		if err := ru.userStep(ctx); err != nil {
			return err
		}
	case ru.to == roleAgent:
		if err := ru.agentStep(ctx, ru.pending); err != nil {
			return err
		}
	case ru.to == roleEnv:
		ru.envStep()
	}
	ru.stats.Steps++
	if err := ru.env.Sync(); err != nil {
		return &InfraError{Stage: StageEnvironment, Err: err}
	}
	return nil
}

func (ru *run) userStep(ctx context.Context) error {
	t, err := ru.user.Respond(ctx, ru.pending)
	if err != nil {
		return &InfraError{Stage: StageUser, Err: err}
	}
	ru.stats.UserLatencies = append(ru.stats.UserLatencies, t.Latency)
	m := t.Message
	m.Role, m.CallIndex = schemas.RoleUser, -1
	for k := range m.ToolCalls {
		m.ToolCalls[k].Requestor = schemas.RequestorUser
	}
	ru.append(m)
	ru.pending = []schemas.Message{m}
	ru.from = roleUser
	if IsUserStop(m.Content, len(m.ToolCalls) > 0) {
		ru.finish(schemas.TerminationUserStop)
	}
	if len(m.ToolCalls) > 0 {
		ru.to = roleEnv
	} else {
		ru.to = roleAgent
	}
	return nil
}

func (ru *run) agentStep(ctx context.Context, in []schemas.Message) error {
	t, err := ru.agent.Act(ctx, in)
	if err != nil {
		if errors.Is(err, ErrContextWindow) {
			ru.finish(schemas.TerminationContextWindowExceeded)
			ru.from, ru.to = roleAgent, roleUser
			return nil
		}
		return &InfraError{Stage: StagePolicy, Err: err}
	}
	ru.stats.AgentLatencies = append(ru.stats.AgentLatencies, t.Latency)
	ru.stats.PromptTokens += t.PromptTokens
	ru.stats.CompletionTokens += t.CompletionTokens
	m := t.Message
	m.Role, m.CallIndex = schemas.RoleAssistant, -1
	if t.Call != nil {
		idx, err := ru.traj.AppendCall(*t.Call)
		if err != nil {
			return &InfraError{Stage: StagePolicy, Err: err}
		}
		m.CallIndex = idx
	}
	if t.Invalid != "" {
		ru.traj.InvalidFormatTurns++
	}
	for k := range m.ToolCalls {
		m.ToolCalls[k].Requestor = schemas.RequestorAssistant
	}
	ru.from = roleAgent
	if ru.r.Config.SoloMode {
		for _, tc := range m.ToolCalls {
			if tc.Name == DoneTool {
				// τ²'s _check_if_stop_toolcall: the message becomes the stop token.
				m.Content, m.ToolCalls = StopToken, nil
				break
			}
		}
	}
	ru.append(m)
	ru.pending = []schemas.Message{m}
	if len(m.ToolCalls) > 0 {
		ru.to = roleEnv
		return nil
	}
	ru.to = roleUser
	if ru.r.Config.SoloMode {
		if strings.Contains(m.Content, StopToken) {
			ru.finish(schemas.TerminationAgentStop)
		} else {
			ru.finish(schemas.TerminationAgentError)
		}
	}
	return nil
}

// envStep executes the pending message's tool calls in order and hands the
// results back to the caller.
func (ru *run) envStep() {
	msg := ru.pending[0]
	requestor := schemas.RequestorAssistant
	back := roleAgent
	if msg.Role == schemas.RoleUser {
		requestor, back = schemas.RequestorUser, roleUser
	}
	results := make([]schemas.Message, 0, len(msg.ToolCalls))
	for _, tc := range msg.ToolCalls {
		var content string
		var isErr bool
		if tc.Name == ThinkTool && requestor == schemas.RequestorAssistant && ru.r.Config.AddThinkingTool {
			content = ThinkResult
		} else {
			content, isErr = ru.env.Call(requestor, tc.Name, tc.Arguments)
		}
		if isErr {
			ru.errors++
			ru.stats.ToolErrors++
		}
		tm := schemas.Message{Role: schemas.RoleTool, Content: content, ToolCallID: tc.ID, Requestor: requestor, ToolError: isErr, CallIndex: -1}
		ru.append(tm)
		results = append(results, tm)
	}
	ru.pending = results
	ru.from, ru.to = roleEnv, back
}

// grade scores the finished episode with τ²'s evaluator.
func (ru *run) grade(ctx context.Context) error {
	if ru.r.Grader == nil {
		return &InfraError{Stage: StageEvaluator, Err: errors.New("no grader configured")}
	}
	g, err := ru.r.Grader.Grade(ctx, ru.in.Task, ru.traj.Messages, ru.traj.Termination)
	if errors.Is(err, ErrNotEvaluated) {
		// A real episode that this configuration cannot grade (NL_ASSERTION without a judge):
		// it keeps its termination and gets no reward, and it is not an infrastructure
		// failure; `tau2-eval grade` with a judge grades it later.
		ru.traj.Status, ru.traj.Error = schemas.StatusNotEvaluated, err.Error()
		ru.traj.Reward, ru.traj.ShapedReward = 0, 0
		return nil
	}
	if err != nil {
		return &InfraError{Stage: StageEvaluator, Err: err}
	}
	ru.traj.Reward, ru.traj.RewardBasis, ru.traj.Breakdown, ru.traj.RewardInfoJSON = g.Reward, g.Basis, g.Breakdown, g.InfoJSON
	ru.traj.ShapedReward = g.Reward
	return nil
}
