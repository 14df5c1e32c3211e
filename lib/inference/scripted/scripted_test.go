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
	clean, err := newScript(t, 0).plan("airline", task, "e1", false, nil)
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
		p1, _ := s.plan("airline", task, "e1", false, nil)
		p2, _ := s.plan("airline", task, "e1", false, nil)
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
	r, err := s.agent(tag, task, append(hist, chattemplate.Message{Role: "user", Content: "Mark it completed."}), false, nil)
	if err != nil || len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "update_task_status" {
		t.Fatalf("agent's first resumed turn %+v %v, want the gold update", r, err)
	}
	done := append(hist, chattemplate.Message{Role: "user", Content: "Mark it completed."}, chattemplate.Message{Role: "assistant", Content: "call"}, chattemplate.Message{Role: "tool", Content: "{}"})
	if r, err := s.agent(tag, task, done, false, nil); err != nil || r.Content != ClosingText {
		t.Errorf("agent after the gold update %+v %v, want the closing", r, err)
	}
	if _, err := s.agent(tag, task, hist[:1], false, nil); err == nil {
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

// bankingTask returns a banking_knowledge task by id.
func bankingTask(t *testing.T, id string) *data.Task {
	t.Helper()
	set, err := episode.LoadTasks("", "banking_knowledge", "")
	if err != nil {
		t.Fatal(err)
	}
	task, ok := set.Get(id)
	if !ok {
		t.Fatalf("no banking_knowledge task %s", id)
	}
	return task
}

// TestPlanLookups: a banking task's plan opens with one retrieval call
// about its first required document through the first retrieval tool
// offered (KB_search, grep, shell); without a retrieval tool, or for a task
// without required documents, there is none.
func TestPlanLookups(t *testing.T) {
	s := newScript(t, 0)
	task := bankingTask(t, "task_001") // first required document: doc_credit_cards_gold_rewards_card_001
	words := "Gold|Rewards|Card|Apply|Premium|Credit"
	for _, tc := range []struct {
		name     string
		tools    []string
		tool     string // "" = no lookup
		argsJSON string
	}{
		{"bm25", []string{"KB_search", "get_user_information_by_id"}, "KB_search", `{"query": "Gold Rewards Card: Apply for a Premium Credit Card"}`},
		{"bm25_grep", []string{"KB_search", "grep"}, "KB_search", `{"query": "Gold Rewards Card: Apply for a Premium Credit Card"}`},
		{"grep_only", []string{"grep", "log_verification"}, "grep", `{"pattern": "` + words + `"}`},
		{"terminal_use", []string{"shell", "log_verification"}, "shell", `{"command": "rg -il '` + words + `' . | head -n 10"}`},
		{"full_kb", []string{"log_verification"}, "", ""},
		{"none offered", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.plan("banking_knowledge", task, "e1", false, tc.tools)
			if err != nil {
				t.Fatal(err)
			}
			lookups := 0
			for _, st := range p {
				if st.kind == stepLookup {
					lookups++
				}
			}
			if tc.tool == "" {
				if lookups != 0 {
					t.Fatalf("%d lookups, want none: %+v", lookups, p)
				}
				return
			}
			if lookups != 1 || p[0].kind != stepLookup || p[0].name != tc.tool || p[0].args != tc.argsJSON {
				t.Fatalf("plan opens with %+v, want %s %s", p[0], tc.tool, tc.argsJSON)
			}
			if !p[1].action() || p[1].name != task.EvaluationCriteria.Actions[0].Name {
				t.Errorf("second step %+v, want the first gold action", p[1])
			}
		})
	}
	set, err := episode.LoadTasks("", "airline", "")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := s.plan("airline", set.Tasks[0], "e1", false, []string{"KB_search"}); len(p) > 0 && p[0].kind == stepLookup {
		t.Errorf("airline task without required documents got a lookup %+v", p[0])
	}
}

// TestGrepPattern: the grep alternation keeps a title's words of four or
// more letters once each, drops "Internal", and falls back to the quoted
// title.
func TestGrepPattern(t *testing.T) {
	for in, want := range map[string]string{
		"Internal: Human Agent Transfer Reason Codes": "Human|Agent|Transfer|Reason|Codes",
		"Submitting a Cash Back Dispute (Internal)":   "Submitting|Cash|Back|Dispute",
		"Card card Card": "Card|card",
		"A (b)":          `A \(b\)`,
	} {
		if got := grepPattern(in); got != want {
			t.Errorf("grepPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPlanTransfers: a transfer that is the last gold action is announced
// (the user then ends the episode); one followed by more gold actions
// (task_005: the customer comes back with a bypass code) is a plain call and
// the plan goes on to every remaining action and the closing question.
func TestPlanTransfers(t *testing.T) {
	s := newScript(t, 0)
	last, err := s.plan("banking_knowledge", bankingTask(t, "task_004"), "e1", false, []string{"KB_search"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(last); n < 2 || last[n-2].name != "transfer_to_human_agents" || last[n-1].text != TransferText {
		t.Errorf("task_004 plan %+v, want it to end with the transfer and its announcement", last)
	}
	task := bankingTask(t, "task_005")
	mid, err := s.plan("banking_knowledge", task, "e1", false, []string{"KB_search"})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, st := range mid {
		if st.text == TransferText {
			t.Errorf("task_005 plan announces the transfer: %+v", mid)
		}
		if st.action() {
			calls = append(calls, st.name)
		}
	}
	var gold []string
	for _, a := range task.EvaluationCriteria.Actions {
		gold = append(gold, a.Name)
	}
	if strings.Join(calls, ",") != strings.Join(gold, ",") || mid[len(mid)-1].text != ClosingText {
		t.Errorf("task_005 calls %v, want %v then the closing; plan %+v", calls, gold, mid)
	}
}

// TestErrorsSpareLookups: skipped_write and wrong_argument act on gold
// writes, never on the retrieval call, whatever the episode.
func TestErrorsSpareLookups(t *testing.T) {
	task := bankingTask(t, "task_001")
	for _, kind := range []string{ErrSkippedWrite, ErrWrongArgument} {
		s := newScript(t, 1, kind)
		clean, _ := newScript(t, 0).plan("banking_knowledge", task, "e0", false, []string{"KB_search"})
		for i := range 20 {
			p, err := s.plan("banking_knowledge", task, "e"+strings.Repeat("x", i), false, []string{"KB_search"})
			if err != nil {
				t.Fatal(err)
			}
			if p[0] != clean[0] {
				t.Fatalf("%s changed the lookup: %+v", kind, p[0])
			}
		}
	}
}

// TestOpeningHasNoStopToken: no task's scripted opening contains a τ² stop
// token, though banking_knowledge's free-text instructions name them (a
// verbatim quote ended the episode on the user's first turn).
func TestOpeningHasNoStopToken(t *testing.T) {
	tau2test.DataDir(t)
	for _, domain := range []string{"airline", "retail", "telecom", "banking_knowledge"} {
		set, err := episode.LoadTasks("", domain, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range set.Tasks {
			o := Opening(task)
			for _, tok := range episode.StopTokens {
				if strings.Contains(o, tok) {
					t.Fatalf("%s %s: opening contains %s", domain, task.ID, tok)
				}
			}
		}
	}
	set, err := episode.LoadTasks("", "banking_knowledge", "")
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, task := range set.Tasks {
		raw := strings.TrimSpace(task.UserScenario.Instructions.Text)
		i := strings.Index(raw, "###")
		if i < 0 {
			continue
		}
		named++
		if before := raw[max(0, i-80):i]; !strings.Contains(Opening(task), before) {
			t.Errorf("%s: opening lost the text before the token %q", task.ID, before)
		}
	}
	if named == 0 {
		t.Error("no banking_knowledge instructions name a stop token: the test checks nothing")
	}
}
