package scripted

import (
	"context"
	"strings"
	"testing"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/episode"
	"tau2rl/tau2/tau2test"
)

func newScript(t *testing.T, rate float64, kinds ...string) *Script {
	t.Helper()
	tau2test.DataDir(t)
	cfg := DefaultConfig()
	cfg.ErrorRate = rate
	if kinds != nil {
		cfg.ErrorKinds = kinds
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{ErrorRate: 2, MaxUserTurns: 1}, {ErrorRate: 0.5, MaxUserTurns: 1}, {ErrorKinds: []string{"nope"}, MaxUserTurns: 1}, {}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestPlanErrors: without errors the plan holds every gold action; each
// error kind changes it as documented, deterministically per episode.
func TestPlanErrors(t *testing.T) {
	set, err := episode.LoadTasks("", "airline", "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := env.New("airline", env.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var task *data.Task
	for _, tk := range set.Tasks {
		if c := tk.EvaluationCriteria; c != nil && len(c.Actions) > 0 && e.IsMutating(c.Actions[0].Name) {
			task = tk
			break
		}
	}
	clean, err := newScript(t, 0).plan("airline", task, "e1", false)
	if err != nil {
		t.Fatal(err)
	}
	actions := 0
	for _, st := range clean {
		if st.action() {
			actions++
		}
	}
	if actions != len(task.EvaluationCriteria.Actions) || clean[len(clean)-1].text != ClosingText {
		t.Fatalf("clean plan %+v", clean)
	}
	for _, kind := range []string{ErrWrongArgument, ErrSkippedWrite, ErrMalformedCall} {
		s := newScript(t, 1, kind)
		p1, _ := s.plan("airline", task, "e1", false)
		p2, _ := s.plan("airline", task, "e1", false)
		if len(p1) != len(p2) {
			t.Fatalf("%s: not deterministic", kind)
		}
		switch kind {
		case ErrSkippedWrite:
			if len(p1) != len(clean)-1 {
				t.Errorf("%s: %d steps, clean %d", kind, len(p1), len(clean))
			}
		case ErrMalformedCall:
			raw := 0
			for _, st := range p1 {
				if st.kind == stepRaw {
					raw++
					if c := chattemplate.ParseCompletion(st.text); c.Valid() {
						t.Errorf("malformed call parses: %q", st.text)
					}
				}
			}
			if raw != 1 || len(p1) != len(clean)+1 {
				t.Errorf("%s: %d raw steps", kind, raw)
			}
		case ErrWrongArgument:
			diff := 0
			for i := range p1 {
				if p1[i].args != clean[i].args {
					diff++
				}
			}
			if diff != 1 {
				t.Errorf("%s: %d steps changed", kind, diff)
			}
		}
	}
}

func TestReplyNeedsTag(t *testing.T) {
	s := newScript(t, 0)
	_, err := s.Reply(context.Background(), &llmtest.Call{Body: []byte(`{"rid": ""}`)})
	if err == nil || !strings.Contains(err.Error(), "tag") {
		t.Fatalf("err %v", err)
	}
}

func TestUserTurns(t *testing.T) {
	s := newScript(t, 0)
	set, _ := episode.LoadTasks("", "airline", "")
	task := set.Tasks[0]
	r, err := s.user(task, []chattemplate.Message{{Role: "user", Content: episode.Greeting}})
	if err != nil || r.Content != Opening(task) || r.Content == "" {
		t.Fatalf("opening %q %v", r.Content, err)
	}
	conv := []chattemplate.Message{{Role: "user", Content: episode.Greeting}, {Role: "assistant", Content: "x"}}
	for _, tc := range []struct{ agent, want string }{
		{TransferText, episode.TransferToken},
		{ClosingText, ThanksText},
		{"Let me check.", GoAheadText},
	} {
		r, err := s.user(task, append(conv, chattemplate.Message{Role: "user", Content: tc.agent}))
		if err != nil || r.Content != tc.want {
			t.Errorf("%q → %q %v", tc.agent, r.Content, err)
		}
	}
	r, err = s.user(task, append(conv, chattemplate.Message{Role: "user", Content: InstructPrefix + `toggle_roaming {"on": true}`}))
	if err != nil || len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "toggle_roaming" {
		t.Errorf("instruction → %+v %v", r, err)
	}
}

// TestResumedConversation: for a task with a message_history the history's
// turns are not the scripted parties' own: the agent starts its plan after
// the history's assistant turns, the user opens after the history's user
// messages, and a conversation shorter than the history is an error.
func TestResumedConversation(t *testing.T) {
	s := newScript(t, 0)
	set, err := episode.LoadTasks("", "mock", "")
	if err != nil {
		t.Fatal(err)
	}
	task, ok := set.Get("update_task_with_message_history")
	if !ok {
		t.Fatal("no mock task update_task_with_message_history")
	}
	if historyCount(task, "assistant") != 2 || historyCount(task, "user") != 1 {
		t.Fatalf("history counts %d assistant, %d user", historyCount(task, "assistant"), historyCount(task, "user"))
	}
	tag := episode.Tag{Episode: "e1", Domain: "mock", TaskID: task.ID}
	hist := []chattemplate.Message{
		{Role: "user", Content: "I need to create a task for the project review meeting."},
		{Role: "assistant", ToolCalls: []chattemplate.ToolCall{{Function: chattemplate.FunctionCall{Name: "create_task"}}}},
		{Role: "tool", Content: "{}"},
		{Role: "assistant", Content: "Created."},
	}
	r, err := s.agent(tag, task, append(hist, chattemplate.Message{Role: "user", Content: "Mark it completed."}), false)
	if err != nil || len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "update_task_status" {
		t.Fatalf("agent's first resumed turn %+v %v, want the gold update", r, err)
	}
	done := append(hist, chattemplate.Message{Role: "user", Content: "Mark it completed."}, chattemplate.Message{Role: "assistant", Content: "call"}, chattemplate.Message{Role: "tool", Content: "{}"})
	if r, err := s.agent(tag, task, done, false); err != nil || r.Content != ClosingText {
		t.Errorf("agent after the gold update %+v %v, want the closing", r, err)
	}
	if _, err := s.agent(tag, task, hist[:1], false); err == nil {
		t.Error("agent accepted a conversation without the history")
	}
	// The user's role-flipped view: its history message is "assistant".
	uview := []chattemplate.Message{{Role: "assistant", Content: hist[0].Content}, {Role: "user", Content: "Created."}}
	if r, err := s.user(task, uview); err != nil || r.Content != Opening(task) {
		t.Errorf("user's first resumed turn %q %v, want the opening", r.Content, err)
	}
	if r, err := s.user(task, append(uview, chattemplate.Message{Role: "assistant", Content: Opening(task)}, chattemplate.Message{Role: "user", Content: ClosingText})); err != nil || r.Content != ThanksText {
		t.Errorf("user at the closing %q %v", r.Content, err)
	}
	if _, err := s.user(task, []chattemplate.Message{{Role: "user", Content: "Created."}}); err == nil {
		t.Error("user accepted a conversation without the history")
	}
}
