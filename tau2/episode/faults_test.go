package episode_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"tau2rl/tau2/data"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/scripted"
	"tau2rl/schemas"
	"tau2rl/tau2/episode"
)

func firstTask(t *testing.T, domain, split string) string {
	t.Helper()
	s := tasks(t, domain, split)
	for _, task := range s.Tasks {
		if c := task.EvaluationCriteria; c != nil && len(c.Actions) > 0 && !slices.Contains(c.RewardBasis, data.RewardNLAssertion) {
			return task.ID
		}
	}
	t.Fatalf("no task with actions in %s/%s", domain, split)
	return ""
}

// TestMalformedToolCallIsInvalidFormatTurn: a cut-short <tool_call> is an
// invalid-format turn, shown to the user as text; the episode goes on and
// still succeeds.
func TestMalformedToolCallIsInvalidFormatTurn(t *testing.T) {
	te := newTestEnv(t, envOpts{domain: "airline", errorRate: 1, kinds: []string{scripted.ErrMalformedCall}})
	res := runTask(t, te, "train", firstTask(t, "airline", "train"))
	if res.Infra != nil {
		t.Fatalf("infra error: %v", res.Infra)
	}
	tr := res.Traj
	if tr.InvalidFormatTurns != 1 {
		t.Fatalf("invalid format turns %d, want 1", tr.InvalidFormatTurns)
	}
	n := 0
	for _, c := range tr.Calls {
		if c.InvalidFormat {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d calls marked invalid", n)
	}
	var found bool
	for i, m := range tr.Messages {
		if m.Role == schemas.RoleAssistant && strings.Contains(m.Content, "<tool_call>") {
			found = true
			if len(m.ToolCalls) != 0 || !tr.Calls[m.CallIndex].InvalidFormat {
				t.Errorf("invalid turn %d: %+v", i, m)
			}
			if next := tr.Messages[i+1]; next.Role != schemas.RoleUser {
				t.Errorf("invalid turn went to %s, want the user", next.Role)
			}
		}
	}
	if !found {
		t.Fatal("the malformed completion is not in the trajectory as text")
	}
	if tr.Reward != 1 {
		t.Errorf("reward %v after a recovered format error, want 1 (%s)", tr.Reward, tr.RewardInfoJSON)
	}
}

// TestDeadPolicyServerIsInfraError: an unreachable policy server ends the
// episode as an infrastructure error, never a reward.
func TestDeadPolicyServerIsInfraError(t *testing.T) {
	te := newTestEnv(t, envOpts{domain: "airline"})
	te.srv.FailNext(100, 503)
	res := runTask(t, te, "train", firstTask(t, "airline", "train"))
	if res.Infra == nil {
		t.Fatalf("no infra error; termination %s reward %v", res.Traj.Termination, res.Traj.Reward)
	}
	if res.Infra.Stage != episode.StageUser && res.Infra.Stage != episode.StagePolicy {
		t.Errorf("stage %s", res.Infra.Stage)
	}
	tr := res.Traj
	if tr.Status != schemas.StatusInfraError || tr.Error == "" || tr.Termination != schemas.TerminationInfrastructureError {
		t.Errorf("trajectory status %s error %q termination %s", tr.Status, tr.Error, tr.Termination)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyFailsMidEpisode: the policy server dies after the user spoke.
func TestPolicyFailsMidEpisode(t *testing.T) {
	var calls int
	s, err := scripted.New(scripted.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	te2 := newTestEnv(t, envOpts{domain: "airline", script: llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		if c.API == llmtest.APIGenerate {
			calls++
			if calls > 1 {
				return llmtest.Reply{}, context.DeadlineExceeded
			}
		}
		return s.Reply(ctx, c)
	})})
	res := runTask(t, te2, "train", firstTask(t, "airline", "train"))
	if res.Infra == nil || res.Infra.Stage != episode.StagePolicy {
		t.Fatalf("want a policy infra error, got %+v", res.Infra)
	}
	if len(res.Traj.Calls) != 1 {
		t.Errorf("partial trajectory has %d calls, want 1", len(res.Traj.Calls))
	}
}

// TestCancellationIsInfraError: a cancelled episode is an infrastructure
// failure (stage canceled), and a timed-out one stage timeout.
func TestCancellationIsInfraError(t *testing.T) {
	te := newTestEnv(t, envOpts{domain: "airline"})
	te.srv.SetLatency(200 * time.Millisecond)
	id := firstTask(t, "airline", "train")
	task, _ := tasks(t, "airline", "train").Get(id)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	res := te.runner.Run(ctx, episode.Input{Task: task, Split: "train", ID: "c1", Sampling: schemas.SamplingParams{MaxTokens: 512}})
	if res.Infra == nil || res.Infra.Stage != episode.StageCanceled {
		t.Fatalf("want stage canceled, got %+v", res.Infra)
	}
	te.runner.Config.Timeout = 300 * time.Millisecond
	res = te.runner.Run(context.Background(), episode.Input{Task: task, Split: "train", ID: "c2", Sampling: schemas.SamplingParams{MaxTokens: 512}})
	if res.Infra == nil || res.Infra.Stage != episode.StageTimeout {
		t.Fatalf("want stage timeout, got %+v", res.Infra)
	}
}

// TestWrongArgumentAndSkippedWriteFail: injected agent errors give reward 0.
func TestWrongArgumentAndSkippedWriteFail(t *testing.T) {
	for _, kind := range []string{scripted.ErrWrongArgument, scripted.ErrSkippedWrite} {
		te := newTestEnv(t, envOpts{domain: "airline", errorRate: 1, kinds: []string{kind}})
		set := tasks(t, "airline", "train")
		zero := 0
		for _, task := range set.Tasks[:8] {
			res := runTask(t, te, "train", task.ID)
			if res.Infra != nil {
				t.Fatalf("%s: infra %v", kind, res.Infra)
			}
			if res.Traj.Reward == 0 {
				zero++
			}
		}
		if zero == 0 {
			t.Errorf("%s: no episode failed", kind)
		}
	}
}

// TestMaxStepsAndTooManyErrors: τ²'s step and error budgets end episodes
// (graded 0), checked only when not handing over to the environment.
func TestMaxStepsAndTooManyErrors(t *testing.T) {
	bad := llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		if c.API == llmtest.APIChat {
			return llmtest.Reply{Content: "I need more help."}, nil
		}
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "no_such_tool", Arguments: json.RawMessage(`{}`)}}}, nil
	})
	te := newTestEnv(t, envOpts{domain: "airline", script: bad})
	res := runTask(t, te, "train", firstTask(t, "airline", "train"))
	if res.Infra != nil {
		t.Fatal(res.Infra)
	}
	if res.Traj.Termination != schemas.TerminationTooManyErrors || res.Traj.Reward != 0 || res.Stats.ToolErrors != 10 {
		t.Errorf("termination %s reward %v errors %d", res.Traj.Termination, res.Traj.Reward, res.Stats.ToolErrors)
	}
	talk := llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		return llmtest.Reply{Content: "Let me think about that."}, nil
	})
	te = newTestEnv(t, envOpts{domain: "airline", script: talk})
	te.runner.Config.MaxSteps = 7
	res = runTask(t, te, "train", firstTask(t, "airline", "train"))
	if res.Traj.Termination != schemas.TerminationMaxSteps || res.Stats.Steps != 7 || len(res.Traj.Messages) != 8 {
		t.Errorf("termination %s steps %d messages %d", res.Traj.Termination, res.Stats.Steps, len(res.Traj.Messages))
	}
}

// TestSoloMode: the solo agent has the user's tools and done(); it starts
// without a greeting and ends with agent_stop.
func TestSoloMode(t *testing.T) {
	te := newTestEnv(t, envOpts{domain: "telecom", solo: true})
	id := firstTask(t, "telecom", "train")
	res := runTask(t, te, "train", id)
	if res.Infra != nil {
		t.Fatal(res.Infra)
	}
	tr := res.Traj
	if tr.Termination != schemas.TerminationAgentStop || tr.Messages[0].Content == episode.Greeting {
		t.Fatalf("termination %s first %q", tr.Termination, tr.Messages[0].Content)
	}
	last := tr.Messages[len(tr.Messages)-1]
	if last.Content != episode.StopToken || len(last.ToolCalls) != 0 {
		t.Errorf("last message %+v", last)
	}
	if tr.Reward != 1 {
		t.Errorf("reward %v: %s", tr.Reward, tr.RewardInfoJSON)
	}
	for _, m := range tr.Messages {
		if m.Role == schemas.RoleUser {
			t.Errorf("user message in solo mode: %+v", m)
		}
	}
}

// TestThinkingToolAndRerender: the think tool is answered by the
// orchestrator; rerender mode records prompts as full re-renders.
func TestThinkingToolAndRerender(t *testing.T) {
	s, err := scripted.New(scripted.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	thought := false
	script := llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		if c.API == llmtest.APIGenerate && !thought && c.LastMessage().Role == chattemplate.RoleUser {
			thought = true
			found := false
			for _, n := range c.ToolNames() {
				found = found || n == episode.ThinkTool
			}
			if !found {
				t.Errorf("think tool not offered: %v", c.ToolNames())
			}
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: episode.ThinkTool, Arguments: map[string]any{"thoughts": "plan"}}}}, nil
		}
		if c.API == llmtest.APIGenerate && c.LastMessage().Role == chattemplate.RoleTool && c.LastMessage().Content == episode.ThinkResult {
			return llmtest.Reply{Content: "Thanks for waiting."}, nil
		}
		return s.Reply(ctx, c)
	})
	te := newTestEnv(t, envOpts{domain: "airline", script: script, thinking: true, mode: chattemplate.ModeRerender})
	res := runTask(t, te, "train", firstTask(t, "airline", "train"))
	if res.Infra != nil {
		t.Fatal(res.Infra)
	}
	var got bool
	for _, m := range res.Traj.Messages {
		if m.Role == schemas.RoleTool && m.Content == episode.ThinkResult && !m.ToolError {
			got = true
		}
	}
	if !got {
		t.Fatal("no think result in the trajectory")
	}
	for i := range res.Traj.Calls {
		if _, err := res.Traj.FullPrompt(i); err != nil {
			t.Fatal(err)
		}
	}
}
