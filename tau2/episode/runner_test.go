package episode_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"tau2rl/tau2/data"

	"tau2rl/schemas"
	"tau2rl/tau2/episode"
)

func runTask(t *testing.T, te *testEnv, split, id string) *episode.Result {
	t.Helper()
	set := tasks(t, te.runner.Config.Domain, split)
	task, ok := set.Get(id)
	if !ok {
		t.Fatalf("no task %s", id)
	}
	return te.runner.Run(context.Background(), episode.Input{Task: task, Split: split, ID: "ep-" + id, Trial: 0, Seed: 7,
		PolicyVersion: 3, Sampling: schemas.SamplingParams{Temperature: 1, MaxTokens: 1024}})
}

// TestScriptedGoldEpisodes plays gold actions without injected errors: every
// episode must end by the user's stop and succeed, in token and chat mode.
func TestScriptedGoldEpisodes(t *testing.T) {
	for _, tc := range []struct {
		domain, split string
		n             int
		chat          bool
	}{
		{"airline", "train", 6, false},
		{"retail", "train", 4, false},
		{"telecom", "train", 4, false},
		{"airline", "test", 3, true},
		{"telecom", "test", 3, true},
		{"banking_knowledge", "base", 4, false}, // task_005 begins with transfer_to_human_agents, which the scripted agent ends the episode on
		{"banking_knowledge", "base", 3, true},
	} {
		t.Run(fmt.Sprintf("%s-%s-chat=%v", tc.domain, tc.split, tc.chat), func(t *testing.T) {
			te := newTestEnv(t, envOpts{domain: tc.domain, chatAgent: tc.chat})
			set := tasks(t, tc.domain, tc.split)
			n := 0
			for _, task := range set.Tasks {
				if n == tc.n {
					break
				}
				if c := task.EvaluationCriteria; c != nil && slices.Contains(c.RewardBasis, data.RewardNLAssertion) {
					continue // needs the NL judge
				}
				n++
				res := runTask(t, te, tc.split, task.ID)
				if res.Infra != nil {
					t.Fatalf("task %s: infra error %v", task.ID, res.Infra)
				}
				tr := res.Traj
				if err := tr.Validate(); err != nil {
					t.Fatal(err)
				}
				if tr.Termination != schemas.TerminationUserStop {
					t.Errorf("task %s: termination %s", task.ID, tr.Termination)
				}
				if tr.Reward != 1 {
					t.Errorf("task %s: reward %v, info %s", task.ID, tr.Reward, tr.RewardInfoJSON)
					for _, m := range tr.Messages {
						t.Logf("  %s: %q %v", m.Role, m.Content, m.ToolCalls)
					}
				}
				if tc.chat != (len(tr.Calls) == 0) {
					t.Errorf("task %s: %d calls recorded in chat=%v mode", task.ID, len(tr.Calls), tc.chat)
				}
				if tr.Messages[0].Content != episode.Greeting {
					t.Errorf("first message %q", tr.Messages[0].Content)
				}
			}
		})
	}
}

// TestNLTaskWithoutJudgeIsNotEvaluated: a retail task whose basis has
// NL_ASSERTION, run without a judge, keeps its real termination (user_stop)
// and is status not_evaluated with no reward; it is not an infrastructure
// failure (issue 13 item 8: it was recorded as infrastructure_error).
func TestNLTaskWithoutJudgeIsNotEvaluated(t *testing.T) {
	te := newTestEnv(t, envOpts{domain: "retail"})
	set := tasks(t, "retail", "train")
	var task *data.Task
	for _, tk := range set.Tasks {
		if c := tk.EvaluationCriteria; c != nil && slices.Contains(c.RewardBasis, data.RewardNLAssertion) && len(c.NLAssertions) > 0 {
			task = tk
			break
		}
	}
	if task == nil {
		t.Fatal("no retail train task needs the NL judge")
	}
	res := runTask(t, te, "train", task.ID)
	tr := res.Traj
	if res.Infra != nil {
		t.Fatalf("task %s: infra error %v", task.ID, res.Infra)
	}
	if tr.Status != schemas.StatusNotEvaluated || tr.Termination != schemas.TerminationUserStop {
		t.Fatalf("task %s: status %s termination %s (%s)", task.ID, tr.Status, tr.Termination, tr.Error)
	}
	if tr.Reward != 0 || tr.ShapedReward != 0 || tr.RewardInfoJSON != "" || !strings.Contains(tr.Error, "NL_ASSERTION") {
		t.Fatalf("task %s: reward %v shaped %v info %q error %q", task.ID, tr.Reward, tr.ShapedReward, tr.RewardInfoJSON, tr.Error)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
}
