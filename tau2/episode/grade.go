package episode

import (
	"context"
	"fmt"

	"tau2rl/schemas"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/evaluator"
	// Every τ² domain registers itself with the environment registry.
	_ "tau2rl/tau2/domains"
)

// Grade is τ²'s grading of one episode in the trajectory's terms.
type Grade struct {
	// Reward is 0 or 1.
	Reward    float64
	Basis     []string
	Breakdown schemas.RewardBreakdown
	// InfoJSON is τ²'s RewardInfo JSON, verbatim.
	InfoJSON string
}

// Grader grades episodes; implementations are safe for concurrent use. A
// returned error is a failure of the grading machinery (never a reward).
type Grader interface {
	Grade(ctx context.Context, task *data.Task, msgs []schemas.Message, termination string) (Grade, error)
}

// TauGrader grades with tau2/evaluator (τ²'s evaluate_simulation,
// EvaluationType.ALL, strict replay). It keeps a pool of evaluator.Graders,
// whose per-task gold environments are cached, for concurrent episodes.
type TauGrader struct {
	opts evaluator.Options
	pool chan *evaluator.Grader
}

// NewTauGrader builds a grader for one domain (and solo mode); poolSize
// bounds how many evaluator.Graders (each with its gold-state cache) are
// kept between episodes.
func NewTauGrader(opts evaluator.Options, poolSize int) (*TauGrader, error) {
	if poolSize < 1 {
		poolSize = 1
	}
	opts.Strict = true
	g, err := evaluator.NewGrader(opts)
	if err != nil {
		return nil, err
	}
	tg := &TauGrader{opts: opts, pool: make(chan *evaluator.Grader, poolSize)}
	tg.pool <- g
	return tg, nil
}

// Grade implements Grader.
func (g *TauGrader) Grade(ctx context.Context, task *data.Task, msgs []schemas.Message, termination string) (Grade, error) {
	var gr *evaluator.Grader
	select {
	case gr = <-g.pool:
	default:
		var err error
		if gr, err = evaluator.NewGrader(g.opts); err != nil {
			return Grade{}, err
		}
	}
	defer func() {
		select {
		case g.pool <- gr:
		default:
		}
	}()
	ri, err := gr.Evaluate(ctx, task, EvaluatorMessages(msgs), termination)
	if err != nil {
		return Grade{}, err
	}
	return GradeFromRewardInfo(ri)
}

// GradeFromRewardInfo converts τ²'s RewardInfo; a reward that was not
// evaluated is ErrNotEvaluated.
func GradeFromRewardInfo(ri *evaluator.RewardInfo) (Grade, error) {
	if ri.Reward == nil {
		return Grade{}, fmt.Errorf("%w: components %v (configure an NL judge)", ErrNotEvaluated, ri.NotEvaluated)
	}
	b, err := ri.MarshalJSON()
	if err != nil {
		return Grade{}, fmt.Errorf("episode: reward info: %w", err)
	}
	gr := Grade{Reward: *ri.Reward, InfoJSON: string(b)}
	for _, t := range ri.RewardBasis {
		gr.Basis = append(gr.Basis, string(t))
	}
	for _, c := range ri.RewardBreakdown {
		v := c.Reward
		switch c.Type {
		case data.RewardDB:
			gr.Breakdown.DB = &v
		case data.RewardEnvAssertion:
			gr.Breakdown.EnvAssertion = &v
		case data.RewardAction:
			gr.Breakdown.Action = &v
		case data.RewardCommunicate:
			gr.Breakdown.Communicate = &v
		case data.RewardNLAssertion:
			gr.Breakdown.NLAssertion = &v
		}
	}
	return gr, nil
}

// EvaluatorMessages converts a trajectory's messages into the evaluator's
// model: tool-call-only messages have content None, tool messages carry the
// call id, requestor and error flag.
func EvaluatorMessages(msgs []schemas.Message) []evaluator.Message {
	out := make([]evaluator.Message, len(msgs))
	for i, m := range msgs {
		em := evaluator.Message{Role: string(m.Role)}
		switch m.Role {
		case schemas.RoleTool:
			em.Content = evaluator.Text(m.Content)
			em.ID, em.Requestor, em.Error = m.ToolCallID, m.Requestor, m.ToolError
		default:
			if len(m.ToolCalls) == 0 || m.Content != "" {
				em.Content = evaluator.Text(m.Content)
			}
			if len(m.ToolCalls) > 0 {
				em.ToolCalls = make([]evaluator.ToolCall, len(m.ToolCalls))
				for k, tc := range m.ToolCalls {
					req := tc.Requestor
					if req == "" {
						req = string(m.Role)
					}
					em.ToolCalls[k] = evaluator.NewToolCall(tc.ID, tc.Name, tc.Arguments, req)
				}
			}
		}
		out[i] = em
	}
	return out
}

// TaskSet is a domain split's tasks, indexed by id.
type TaskSet struct {
	Domain, Split string
	Tasks         []*data.Task
	byID          map[string]*data.Task
}

// Get returns the task with id.
func (s *TaskSet) Get(id string) (*data.Task, bool) {
	t, ok := s.byID[id]
	return t, ok
}

// LoadTasks loads (once per process) a domain's tasks restricted to a split
// ("" = all tasks) from the HEAD task files.
func LoadTasks(dataDir, domain, split string) (*TaskSet, error) {
	dir, err := data.Dir(dataDir)
	if err != nil {
		return nil, err
	}
	return env.LoadOnce("episode-tasks:"+dir+":"+domain+":"+split, func() (*TaskSet, error) {
		tasks, err := data.LoadSplit(dir, domain, data.Head, split)
		if err != nil {
			return nil, fmt.Errorf("episode: tasks of %s/%s: %w", domain, split, err)
		}
		s := &TaskSet{Domain: domain, Split: split, Tasks: tasks, byID: make(map[string]*data.Task, len(tasks))}
		for _, t := range tasks {
			s.byID[t.ID] = t
		}
		return s, nil
	})
}
