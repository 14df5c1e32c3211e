package data

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"tau2rl/tau2/pyjson"
)

func TestParseTasksFixture(t *testing.T) {
	tasks, err := LoadTasksFile(filepath.Join("testdata", "tasks_small.json"))
	if err != nil {
		t.Fatal(err)
	}
	t1, t2 := tasks[0], tasks[1]
	if t1.EvaluationCriteria.CommunicateInfo == nil || len(t1.EvaluationCriteria.CommunicateInfo) != 0 {
		t.Error("[] must stay an empty, non-nil list")
	}
	if t1.EvaluationCriteria.EnvAssertions != nil {
		t.Error("absent list must be nil")
	}
	if got := t1.EvaluationCriteria.Actions[0].Requestor; got != "assistant" {
		t.Errorf("default requestor %q", got)
	}
	if v, _ := t1.EvaluationCriteria.Actions[0].Arguments.Get("n"); v != 1.0 {
		t.Errorf("argument kept as %v", v)
	}
	// v0.2.1-style criteria without reward_basis default to [DB, COMMUNICATE].
	if rb := t2.EvaluationCriteria.RewardBasis; len(rb) != 2 || rb[0] != RewardDB || rb[1] != RewardCommunicate {
		t.Errorf("default reward basis %v", rb)
	}
	if !t2.EvaluationCriteria.EnvAssertions[0].AssertValue {
		t.Error("assert_value default must be true")
	}
	if t2.EvaluationCriteria.Actions[0].CompareArgs == nil || t2.EvaluationCriteria.Actions[0].Requestor != "user" {
		t.Error("compare_args [] / requestor user lost")
	}
	if t2.InitialState.InitializationData.AgentData == nil || len(t2.InitialState.MessageHistory) != 1 || t2.UserTools[0] != "check" {
		t.Error("initial state lost")
	}
	want := "Persona:\n\tBrisk.\n\n\tSecond paragraph.\nInstructions:\n\tDomain: airline\n\tReason for call:\n\t\tCancel.\n\n\t\tNow.\n\tKnown info:\n\t\tYou are Zoë.\n\tTask instructions:\n\t\tLine 1\n   \n\t\tLine 3\n"
	if got := t1.UserScenario.String(); got != want {
		t.Errorf("scenario\n got %q\nwant %q", got, want)
	}
	if got := t2.UserScenario.String(); got != "Instructions:\n\tPlain text instructions." {
		t.Errorf("plain scenario %q", got)
	}
	if t1.Raw == nil || pyjson.MustDumps(t1.Raw) == "" {
		t.Error("raw task not kept")
	}
}

func TestParseTasksErrors(t *testing.T) {
	for _, in := range []string{`{}`, `[{"id": "a"}]`, `[{"id": "a", "user_scenario": {"instructions": 5}}]`,
		`[{"id": "a", "user_scenario": {"instructions": "x"}}, {"id": "a", "user_scenario": {"instructions": "y"}}]`, `[`} {
		if _, err := ParseTasks(in); err == nil {
			t.Errorf("ParseTasks(%s) succeeded", in)
		}
	}
}

func TestDirResolution(t *testing.T) {
	if _, err := Dir(t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty dir: %v", err)
	}
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "tau2", "domains"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Dir(d); err != nil || got != d {
		t.Fatalf("override: %s %v", got, err)
	}
	t.Setenv(EnvVar, d)
	if got, err := Dir(""); err != nil || got != d {
		t.Fatalf("env var: %s %v", got, err)
	}
	if _, err := ParseVersion("v9"); err == nil {
		t.Fatal("bad version accepted")
	}
	if DomainDirName("telecom-workflow") != "telecom" {
		t.Fatal("telecom-workflow dir")
	}
}

func realDir(t *testing.T) string {
	t.Helper()
	d, err := Dir("")
	if err != nil {
		t.Skipf("τ² data not available (set %s): %v", EnvVar, err)
	}
	return d
}

// TestRealTasks loads every domain's tasks and splits (HEAD and v0.2.1).
func TestRealTasks(t *testing.T) {
	dir := realDir(t)
	for _, c := range []struct {
		domain string
		ver    Version
		n      int
		splits map[string]int
	}{
		{"airline", Head, 50, map[string]int{"train": 30, "test": 20, "base": 50}},
		{"airline", V021, 50, nil},
		{"retail", Head, 114, map[string]int{"train": 74, "test": 40, "base": 114}},
		{"retail", V021, 114, nil},
		{"telecom", Head, 2285, map[string]int{"small": 20, "train": 74, "test": 40, "base": 114, "full": 2285}},
		{"telecom", V021, 2285, nil},
		{"mock", Head, 10, map[string]int{"base": 10}},
		{"mock", V021, 9, nil},
	} {
		tasks, err := LoadTasks(dir, c.domain, c.ver)
		if err != nil {
			t.Fatalf("%s %q: %v", c.domain, c.ver, err)
		}
		if len(tasks) != c.n {
			t.Errorf("%s %q: %d tasks, want %d", c.domain, c.ver, len(tasks), c.n)
		}
		if c.splits == nil {
			continue
		}
		splits, err := LoadSplits(dir, c.domain)
		if err != nil {
			t.Fatal(err)
		}
		for name, n := range c.splits {
			sub, err := FilterSplit(tasks, splits, name)
			if err != nil || len(sub) != n {
				t.Errorf("%s split %s: %d tasks (%v), want %d", c.domain, name, len(sub), err, n)
			}
		}
	}
	// v0.2.1 airline/retail have no reward_basis: the default applies.
	tasks, _ := LoadTasks(dir, "retail", V021)
	if rb := tasks[0].EvaluationCriteria.RewardBasis; len(rb) != 2 || rb[1] != RewardCommunicate {
		t.Errorf("v0.2.1 retail reward basis %v", rb)
	}
}

// TestUserSystemPrompts renders the user simulator's system prompt for every
// base task and compares it with τ²'s own rendering (derived/).
func TestUserSystemPrompts(t *testing.T) {
	dir := realDir(t)
	for _, domain := range []string{"airline", "retail", "telecom", "mock"} {
		split := "base"
		tasks, err := LoadSplit(dir, domain, Head, split)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]*Task{}
		for _, tk := range tasks {
			byID[tk.ID] = tk
		}
		f, err := os.Open(filepath.Join(dir, "derived", "user_system_prompts_"+domain+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		n := 0
		for sc.Scan() {
			var rec struct {
				TaskID       string `json:"task_id"`
				UsesTools    bool   `json:"uses_tools_guidelines"`
				SystemPrompt string `json:"system_prompt"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			tk, ok := byID[rec.TaskID]
			if !ok {
				t.Fatalf("%s: task %s not in base split", domain, rec.TaskID)
			}
			g, err := UserGuidelines(dir, rec.UsesTools)
			if err != nil {
				t.Fatal(err)
			}
			if got := UserSystemPrompt(g, tk); got != rec.SystemPrompt {
				t.Errorf("%s task %s: prompt differs\n got %q\nwant %q", domain, rec.TaskID, got, rec.SystemPrompt)
			}
			n++
		}
		f.Close()
		if n != len(tasks) {
			t.Errorf("%s: %d prompts for %d base tasks", domain, n, len(tasks))
		}
	}
}

func FuzzParseTasks(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "tasks_small.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add(`[{"id": "x", "user_scenario": {"instructions": {"domain": "d", "reason_for_call": "r", "task_instructions": "t"}}}]`)
	f.Fuzz(func(t *testing.T, s string) {
		tasks, err := ParseTasks(s)
		if err != nil {
			return
		}
		for _, tk := range tasks {
			_ = tk.UserScenario.String()
			if _, err := pyjson.Dumps(tk); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestAgentSystemPrompts compares the rendered agent system prompt with
// τ²'s (derived/agent_system_prompts.json) for the single-file policies.
func TestAgentSystemPrompts(t *testing.T) {
	dir := realDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "derived", "agent_system_prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]struct {
		Prompt string `json:"agent_system_prompt"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for _, domain := range []string{"airline", "retail", "mock"} {
		p, err := Policy(dir, domain, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := AgentSystemPrompt(p); got != want[domain].Prompt {
			t.Errorf("%s agent prompt differs:\n got %q\nwant %q", domain, got, want[domain].Prompt)
		}
	}
}
