package episode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tau2rl/lib/inference/tokenizer/tokenizertest"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/scripted"
	"tau2rl/schemas"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/episode"
	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

// callLog wraps a script and keeps every call it answers.
type callLog struct {
	inner llmtest.Script
	mu    sync.Mutex
	calls []*llmtest.Call
}

func (r *callLog) Reply(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return r.inner.Reply(ctx, c)
}

// byRole splits the recorded calls into the agent's and the user
// simulator's, in order.
func (r *callLog) byRole() (agent, user []*llmtest.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.calls {
		if strings.HasPrefix(c.Messages[0].Content, "<instructions>") {
			agent = append(agent, c)
		} else {
			user = append(user, c)
		}
	}
	return agent, user
}

// The mock tasks' shared history, as τ² gives it to an LLM.
const (
	histUser      = "I need to create a task for the project review meeting."
	histToolRes   = `{"task_id":"task_2","title":"Project Review","description":"Review Q4 project status","status":"pending"}`
	histAssistant = "I've created a task titled 'Project Review' for you. The task has been created with ID task_2 and is currently in pending status."
	histArgs      = `{"user_id": "user_1", "title": "Project Review", "description": "Review Q4 project status"}`
)

// mockHistory is the mock tasks' message_history in trajectory form.
func mockHistory() []schemas.Message {
	return []schemas.Message{
		{Role: schemas.RoleUser, Content: histUser, CallIndex: -1},
		{Role: schemas.RoleAssistant, ToolCalls: []schemas.ToolCall{{ID: "call_1", Name: "create_task", Arguments: histArgs, Requestor: "assistant"}}, CallIndex: -1},
		{Role: schemas.RoleTool, Content: histToolRes, ToolCallID: "call_1", Requestor: "assistant", CallIndex: -1},
		{Role: schemas.RoleAssistant, Content: histAssistant, CallIndex: -1},
	}
}

// checkStartsWith checks that the trajectory opens with want (as τ²'s
// trajectory does: the history, turn indices from 0, timestamps one
// second apart before the start) and holds no greeting.
func checkStartsWith(t *testing.T, tr *schemas.Trajectory, want []schemas.Message) {
	t.Helper()
	if len(tr.Messages) < len(want) {
		t.Fatalf("%d messages, want at least the %d of the history", len(tr.Messages), len(want))
	}
	for i, w := range want {
		g := tr.Messages[i]
		if g.Role != w.Role || g.Content != w.Content || g.ToolCallID != w.ToolCallID || g.Requestor != w.Requestor ||
			g.ToolError != w.ToolError || g.CallIndex != -1 || g.Turn != i || !slices.Equal(g.ToolCalls, w.ToolCalls) {
			t.Errorf("message %d = %+v, want %+v", i, g, w)
		}
		if i > 0 && g.Timestamp.Sub(tr.Messages[i-1].Timestamp) != time.Second {
			t.Errorf("message %d: timestamp %s, previous %s: want one second apart", i, g.Timestamp, tr.Messages[i-1].Timestamp)
		}
	}
	if !tr.Messages[len(want)-1].Timestamp.Before(tr.StartedAt) {
		t.Errorf("history timestamps end at %s, not before the start %s", tr.Messages[len(want)-1].Timestamp, tr.StartedAt)
	}
	for i, m := range tr.Messages {
		if m.Content == episode.Greeting {
			t.Errorf("message %d is the greeting: a resumed episode has none", i)
		}
		if i >= len(want) && m.Timestamp.Before(tr.Messages[len(want)-1].Timestamp) {
			t.Errorf("message %d sorts before the history", i)
		}
	}
}

// expectedFirstPrompt is the Qwen3 rendering of the mock agent's system
// turn and tools followed by conv, with the generation prompt.
func expectedFirstPrompt(t *testing.T, conv []chattemplate.Message) []int32 {
	t.Helper()
	e, err := env.New("mock", env.Options{DataDir: tau2test.DataDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	var tools []json.RawMessage
	for _, tl := range e.Tools() {
		tools = append(tools, json.RawMessage(tl.Schema))
	}
	msgs := append([]chattemplate.Message{{Role: chattemplate.RoleSystem, Content: episode.AgentSystemPrompt(e.Policy)}}, conv...)
	text, err := chattemplate.Render(msgs, chattemplate.Options{Tools: tools, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	// The history's call, as Qwen3's template writes a tool call.
	if want := "<tool_call>\n" + `{"name": "create_task", "arguments": ` + histArgs + "}\n</tool_call>"; !strings.Contains(text, want) {
		t.Fatalf("rendered history lacks %q", want)
	}
	return tokenizertest.Qwen3(t).Encode(text)
}

// chatHistory is the mock history as the agent's chat template reads it.
func chatHistory() []chattemplate.Message {
	return []chattemplate.Message{
		{Role: "user", Content: histUser},
		{Role: "assistant", ToolCalls: []chattemplate.ToolCall{{ID: "call_1", Type: "function", Function: chattemplate.FunctionCall{Name: "create_task", Arguments: json.RawMessage(histArgs)}}}},
		{Role: "tool", Content: histToolRes, ToolCallID: "call_1"},
		{Role: "assistant", Content: histAssistant},
	}
}

// TestResumedMockTasks runs the mock tasks that carry a message_history end
// to end against the scripted server, in token mode (both history modes)
// and chat mode: the trajectory starts with the history, each party sees it
// as τ² shows it, the history is prompt (never completion) in token mode,
// and the episode is graded as τ² grades it — the scripted agent performs
// the gold update for update_task_with_message_history (DB + COMMUNICATE:
// reward 1) but has no gold action to play for
// update_task_with_history_and_env_assertions, whose env assertion (task_2,
// created by the replayed history, completed) then fails: reward 0.
func TestResumedMockTasks(t *testing.T) {
	for _, tc := range []struct {
		name string
		chat bool
		mode chattemplate.Mode
	}{
		{"token-incremental", false, ""},
		{"token-rerender", false, chattemplate.ModeRerender},
		{"chat", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := scripted.New(scripted.Config{ErrorRate: 0, MaxUserTurns: 30, Reasoning: true})
			if err != nil {
				t.Fatal(err)
			}
			rec := &callLog{inner: s}
			te := newTestEnv(t, envOpts{domain: "mock", chatAgent: tc.chat, mode: tc.mode, script: rec})
			for _, task := range []struct {
				id     string
				reward float64
			}{
				{"update_task_with_message_history", 1},
				{"update_task_with_history_and_env_assertions", 0},
			} {
				rec.calls = nil
				res := runTask(t, te, "base", task.id)
				if res.Infra != nil {
					t.Fatalf("%s: infra error %v", task.id, res.Infra)
				}
				tr := res.Traj
				if err := tr.Validate(); err != nil {
					t.Fatal(err)
				}
				checkStartsWith(t, tr, mockHistory())
				if tr.Termination != schemas.TerminationUserStop {
					t.Errorf("%s: termination %s", task.id, tr.Termination)
				}
				if tr.Reward != task.reward {
					t.Errorf("%s: reward %v, want %v; info %s", task.id, tr.Reward, task.reward, tr.RewardInfoJSON)
				}
				// The first new message is the user's: the history ends with
				// the agent's text.
				opening := tr.Messages[4]
				if opening.Role != schemas.RoleUser || !strings.Contains(opening.Content, "mark the task as completed") {
					t.Fatalf("%s: first new message %+v, want the user's opening", task.id, opening)
				}
				agentCalls, userCalls := rec.byRole()
				// The user simulator's first view: its system prompt, then the
				// history through τ²'s user filter, role-flipped (its own
				// message as assistant, the agent's text as user).
				u0 := userCalls[0].Messages[1:]
				if len(u0) != 2 || u0[0].Role != "assistant" || u0[0].Content != histUser || u0[1].Role != "user" || u0[1].Content != histAssistant {
					t.Errorf("%s: user's first view %+v", task.id, u0)
				}
				// The agent's first view: the whole history, then the opening.
				a0 := agentCalls[0].Messages[1:]
				if len(a0) != 5 || a0[1].ToolCalls[0].Function.Name != "create_task" || a0[3].Content != histAssistant || a0[4].Content != opening.Content {
					t.Errorf("%s: agent's first view %q: %+v", task.id, roles(a0), a0)
				}
				if tc.chat {
					if len(tr.Calls) != 0 {
						t.Errorf("%s: %d calls in chat mode", task.id, len(tr.Calls))
					}
					continue
				}
				prompt, err := tr.FullPrompt(0)
				if err != nil {
					t.Fatal(err)
				}
				want := expectedFirstPrompt(t, append(chatHistory(), chattemplate.Message{Role: "user", Content: opening.Content}))
				if !slices.Equal(prompt, want) {
					t.Errorf("%s: first prompt (%d tokens) is not the template's rendering of the history (%d tokens)", task.id, len(prompt), len(want))
				}
				// Every policy message is a completion; no history turn is.
				policy := 0
				for i, m := range tr.Messages {
					if i < 4 {
						continue
					}
					if m.Role == schemas.RoleAssistant {
						policy++
						if m.CallIndex < 0 {
							t.Errorf("%s: message %d: policy message without a call", task.id, i)
						}
					}
				}
				if policy != len(tr.Calls) {
					t.Errorf("%s: %d policy messages, %d calls", task.id, policy, len(tr.Calls))
				}
				hist, err := tokenizertest.Qwen3(t).Decode(tr.Calls[0].CompletionTokens)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(hist, histAssistant) || strings.Contains(hist, "create_task") {
					t.Errorf("%s: the first completion holds history: %q", task.id, hist)
				}
			}
		})
	}
}

// mustHistory parses a JSON list of τ² messages into a message_history.
func mustHistory(t *testing.T, js string) []*pyjson.Object {
	t.Helper()
	v, err := pyjson.Loads(js)
	if err != nil {
		t.Fatal(err)
	}
	var out []*pyjson.Object
	for _, m := range v.([]any) {
		out = append(out, m.(*pyjson.Object))
	}
	return out
}

// withHistory returns a copy of a mock task with another message_history.
func withHistory(t *testing.T, id, history string) *data.Task {
	t.Helper()
	orig, ok := tasks(t, "mock", "base").Get(id)
	if !ok {
		t.Fatalf("no task %s", id)
	}
	task := *orig
	task.InitialState = &data.InitialState{MessageHistory: mustHistory(t, history)}
	return &task
}

// updateScript plays a minimal agent and user for the mock update tasks,
// whatever the history: the agent marks task_2 completed and confirms; the
// user asks for it and stops after the confirmation.
func updateScript() llmtest.Script {
	return llmtest.ScriptFunc(func(_ context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		last := c.LastMessage()
		if strings.HasPrefix(c.Messages[0].Content, "<instructions>") {
			if last.Role == chattemplate.RoleTool && strings.Contains(last.Content, `"completed"`) {
				return llmtest.Reply{Content: "Task task_2 is now completed. Is there anything else I can help you with?"}, nil
			}
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "update_task_status", Arguments: json.RawMessage(`{"task_id": "task_2", "status": "completed"}`)}}}, nil
		}
		if strings.Contains(last.Content, "anything else") {
			return llmtest.Reply{Content: "No, thanks. " + episode.StopToken}, nil
		}
		return llmtest.Reply{Content: "Please mark task_2 as completed."}, nil
	})
}

const (
	jsUser    = `{"role": "user", "content": "I need to create a task for the project review meeting."}`
	jsCall    = `{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "name": "create_task", "arguments": {"user_id": "user_1", "title": "Project Review", "description": "Review Q4 project status"}}]}`
	jsResult  = `{"role": "tool", "id": "call_1", "content": "{\"task_id\":\"task_2\",\"title\":\"Project Review\",\"description\":\"Review Q4 project status\",\"status\":\"pending\"}"}`
	jsText    = `{"role": "assistant", "content": "Task task_2 was created."}`
	jsRequest = `{"role": "user", "content": "Now mark it as completed, please."}`
)

// TestResumeRouting resumes histories that end with each kind of message
// and checks who speaks first, what each party sees, and the grade (the
// env-assertion task: task_2 must exist — created by the replayed history
// — and be completed by the episode).
func TestResumeRouting(t *testing.T) {
	const taskID = "update_task_with_history_and_env_assertions"
	for _, tc := range []struct {
		name    string
		history string
		// first is the role of the first LLM call ("" = none).
		first string
		// agentView and userView are the roles of each party's history in
		// its first call (user's view role-flipped), "" when not called.
		agentView, userView string
		termination         string
		reward              float64
		calls               int
	}{
		{name: "ends with agent text", history: "[" + jsUser + "," + jsCall + "," + jsResult + "," + jsText + "]",
			first: "user", agentView: "user assistant tool assistant user", userView: "assistant user",
			termination: schemas.TerminationUserStop, reward: 1, calls: 2},
		{name: "ends with user text", history: "[" + jsUser + "," + jsCall + "," + jsResult + "," + jsText + "," + jsRequest + "]",
			first: "agent", agentView: "user assistant tool assistant user", userView: "assistant user assistant user",
			termination: schemas.TerminationUserStop, reward: 1, calls: 2},
		{name: "ends with agent tool result", history: "[" + jsUser + "," + jsCall + "," + jsResult + "]",
			first: "agent", agentView: "user assistant tool", userView: "assistant user",
			termination: schemas.TerminationUserStop, reward: 1, calls: 2},
		{name: "ends with user stop", history: "[" + jsUser + "," + jsCall + "," + jsResult + "," + jsText + `,{"role": "user", "content": "Bye ###STOP###"}]`,
			termination: schemas.TerminationUserStop, reward: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &callLog{inner: updateScript()}
			te := newTestEnv(t, envOpts{domain: "mock", script: rec})
			task := withHistory(t, taskID, tc.history)
			res := te.runner.Run(context.Background(), episode.Input{Task: task, Split: "base", ID: "ep-" + strings.ReplaceAll(tc.name, " ", "-"), Seed: 1, PolicyVersion: 3,
				Sampling: schemas.SamplingParams{Temperature: 1, MaxTokens: 512}})
			if res.Infra != nil {
				t.Fatalf("infra error %v", res.Infra)
			}
			tr := res.Traj
			n := len(task.InitialState.MessageHistory)
			if len(tr.Messages) < n || tr.Messages[n-1].Turn != n-1 {
				t.Fatalf("trajectory does not start with the %d history messages", n)
			}
			if tr.Termination != tc.termination || tr.Reward != tc.reward || len(tr.Calls) != tc.calls {
				t.Errorf("termination %s reward %v calls %d, want %s %v %d; info %s", tr.Termination, tr.Reward, len(tr.Calls), tc.termination, tc.reward, tc.calls, tr.RewardInfoJSON)
			}
			agent, user := rec.byRole()
			switch {
			case tc.first == "":
				if len(agent)+len(user) != 0 {
					t.Errorf("%d LLM calls for an episode the history already ended", len(agent)+len(user))
				}
				return
			case len(agent) == 0 || len(user) == 0:
				t.Fatalf("agent called %d times, user %d", len(agent), len(user))
			case (tc.first == "agent") != (agent[0].Seq < user[0].Seq):
				t.Errorf("first call: agent #%d, user #%d, want the %s first", agent[0].Seq, user[0].Seq, tc.first)
			}
			if got := roles(agent[0].Messages[1:]); got != tc.agentView {
				t.Errorf("agent's first view %q, want %q", got, tc.agentView)
			}
			if got := roles(user[0].Messages[1:]); got != tc.userView {
				t.Errorf("user's first view %q, want %q", got, tc.userView)
			}
		})
	}
}

func roles(msgs []chattemplate.Message) string {
	var r []string
	for _, m := range msgs {
		r = append(r, m.Role)
	}
	return strings.Join(r, " ")
}

// TestResumeRejects: a history that τ² cannot resume ends the episode as an
// infrastructure error (stage environment), before any LLM call.
func TestResumeRejects(t *testing.T) {
	for _, tc := range []struct {
		name, history, want string
		solo                bool
	}{
		{"trailing tool call", "[" + jsUser + "," + jsCall + "]", "Tool message expected", false},
		{"replay mismatch", "[" + jsUser + "," + jsCall + "," + strings.Replace(jsResult, "task_2", "task_9", 1) + "]", "replayed tool call create_task", false},
		{"orphan tool message", "[" + jsUser + "," + jsResult + "]", "Tool message not expected", false},
		{"result requestor", "[" + jsUser + "," + jsCall + "," + strings.Replace(jsResult, `"role": "tool",`, `"role": "tool", "requestor": "user",`, 1) + "]", "got tool message from user, expected assistant", false},
		{"empty message", `[{"role": "user", "content": "  "}]`, "must have either content or tool_calls", false},
		{"system message", `[{"role": "system", "content": "You are helpful."}]`, "invalid message type", false},
		{"not a message", `[{"role": "user", "content": 3}]`, "content", false},
		{"solo user message", "[" + jsUser + "]", "User messages are not allowed in solo mode", true},
		{"solo turn to the user", "[" + jsCall + "," + jsResult + "," + jsText + "]", "solo mode has no user", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &callLog{inner: updateScript()}
			te := newTestEnv(t, envOpts{domain: "mock", script: rec, solo: tc.solo})
			res := te.runner.Run(context.Background(), episode.Input{Task: withHistory(t, "update_task_with_message_history", tc.history), Split: "base", ID: "ep-reject"})
			if res.Infra == nil {
				t.Fatalf("no infra error; termination %s", res.Traj.Termination)
			}
			if res.Infra.Stage != episode.StageEnvironment || !strings.Contains(res.Infra.Error(), tc.want) {
				t.Errorf("error %v (stage %s), want stage %s containing %q", res.Infra, res.Infra.Stage, episode.StageEnvironment, tc.want)
			}
			if res.Traj.Status != schemas.StatusInfraError || res.Traj.Reward != 0 || res.Traj.Termination != schemas.TerminationInfrastructureError {
				t.Errorf("trajectory status %s reward %v termination %s", res.Traj.Status, res.Traj.Reward, res.Traj.Termination)
			}
			if n := len(rec.calls); n != 0 {
				t.Errorf("%d LLM calls", n)
			}
			var ie *episode.InfraError
			if !errors.As(error(res.Infra), &ie) {
				t.Error("not an *InfraError")
			}
		})
	}
}

// TestResumeSolo resumes solo-mode histories: one the solo agent already
// stopped is graded at once (agent_stop); one that ends with a tool result
// goes to the agent, which continues with the tool calls alone.
func TestResumeSolo(t *testing.T) {
	stop := `{"role": "assistant", "content": "###STOP###"}`
	for _, tc := range []struct {
		name, history, termination string
		calls                      int
	}{
		{"stopped", "[" + jsCall + "," + jsResult + "," + stop + "]", schemas.TerminationAgentStop, 0},
		{"tool result", "[" + jsCall + "," + jsResult + "]", schemas.TerminationAgentStop, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			script := llmtest.ScriptFunc(func(_ context.Context, c *llmtest.Call) (llmtest.Reply, error) {
				calls++
				if !strings.Contains(c.Messages[0].Content, "<ticket>") {
					return llmtest.Reply{}, fmt.Errorf("not the solo agent's prompt")
				}
				if got := roles(c.Messages[1:3]); got != "assistant tool" {
					return llmtest.Reply{}, fmt.Errorf("solo agent's view starts %q, want the history", got)
				}
				if calls == 1 {
					return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "update_task_status", Arguments: map[string]any{"task_id": "task_2", "status": "completed"}}}}, nil
				}
				return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: episode.DoneTool, Arguments: map[string]any{}}}}, nil
			})
			te := newTestEnv(t, envOpts{domain: "mock", script: script, solo: true})
			task := withHistory(t, "update_task_with_history_and_env_assertions", tc.history)
			res := te.runner.Run(context.Background(), episode.Input{Task: task, Split: "base", ID: "ep-solo-" + tc.name})
			if res.Infra != nil {
				t.Fatalf("infra error %v", res.Infra)
			}
			tr := res.Traj
			if tr.Termination != tc.termination || len(tr.Calls) != tc.calls {
				t.Errorf("termination %s, %d calls; want %s, %d", tr.Termination, len(tr.Calls), tc.termination, tc.calls)
			}
			// Graded on the replayed state: task_2 exists; completed only
			// when the agent went on.
			if want := map[bool]float64{true: 1, false: 0}[tc.calls > 0]; tr.Reward != want {
				t.Errorf("reward %v, want %v: %s", tr.Reward, want, tr.RewardInfoJSON)
			}
		})
	}
}
