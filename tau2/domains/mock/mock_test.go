package mock

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

// TestTasksAgainstReference runs, for every mock task, initialization data
// and actions, the gold actions and the env assertions, and compares the
// outcome and the agent/user DB hashes with τ²'s own toolkits
// (testdata/gen_golden.py).
func TestTasksAgainstReference(t *testing.T) {
	dir := tau2test.DataDir(t)
	b, err := os.ReadFile(filepath.Join("testdata", "golden", "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]struct {
		ErrorActions []int  `json:"error_actions"`
		Assertions   []any  `json:"assertions"`
		AgentHash    string `json:"agent_hash"`
		UserHash     string `json:"user_hash"`
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	tasks, err := data.LoadTasks(dir, "mock", data.Head)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		want, ok := golden[task.ID]
		if !ok {
			t.Fatalf("no golden for %s", task.ID)
		}
		e, err := env.New("mock", env.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if st := task.InitialState; st != nil {
			if d := st.InitializationData; d != nil {
				if err := e.ApplyInitializationData(d.AgentData, d.UserData); err != nil {
					t.Fatalf("%s: %v", task.ID, err)
				}
			}
			for _, a := range st.InitializationActions {
				if _, err := e.RunEnvFunction(a.EnvType, a.FuncName, a.Arguments); err != nil {
					t.Fatalf("%s: init action %s: %v", task.ID, a.FuncName, err)
				}
			}
		}
		var failed []int
		var asserts []any
		if ec := task.EvaluationCriteria; ec != nil {
			for i, a := range ec.Actions {
				if _, err := e.MakeToolCall(a.Requestor, a.Name, a.Arguments); err != nil {
					failed = append(failed, i)
				}
			}
			for _, a := range ec.EnvAssertions {
				met, err := e.RunAssertion(a.EnvType, a.FuncName, a.Arguments, a.AssertValue)
				if err != nil {
					asserts = append(asserts, "Error: "+err.Error())
				} else {
					asserts = append(asserts, met)
				}
			}
		}
		if !slices.Equal(failed, want.ErrorActions) {
			t.Errorf("%s: failed actions %v, want %v", task.ID, failed, want.ErrorActions)
		}
		if len(asserts) != len(want.Assertions) {
			t.Errorf("%s: assertions %v, want %v", task.ID, asserts, want.Assertions)
		}
		for i := range min(len(asserts), len(want.Assertions)) {
			if asserts[i] != want.Assertions[i] {
				t.Errorf("%s: assertion %d = %v, want %v", task.ID, i, asserts[i], want.Assertions[i])
			}
		}
		ah, uh, err := e.Hashes()
		if err != nil {
			t.Fatal(err)
		}
		if ah != want.AgentHash || uh != want.UserHash {
			t.Errorf("%s: hashes (%s, %s), want (%s, %s)", task.ID, ah, uh, want.AgentHash, want.UserHash)
		}
	}
}

func TestSchemasIdentical(t *testing.T) {
	if err := env.CheckSchemas(tau2test.DataDir(t), "mock", AgentToolkit, UserToolkit); err != nil {
		t.Fatal(err)
	}
}

func TestToolOutputs(t *testing.T) {
	dir := tau2test.DataDir(t)
	e, err := env.New("mock", env.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req, name, args, want string
		isErr                 bool
	}{
		{env.Assistant, "get_users", "", `[{"user_id": "user_1", "name": "Test User", "tasks": ["task_1"]}]`, false},
		{env.Assistant, "create_task", `{"user_id": "user_1", "title": "Caf\u00e9"}`, `{"task_id": "task_2", "title": "Caf\u00e9", "description": null, "status": "pending"}`, false},
		{env.Assistant, "create_task", `{"user_id": "user_9", "title": "x"}`, `Error: User user_9 not found`, true},
		{env.Assistant, "update_task_status", `{"task_id": "task_2", "status": "completed"}`, `{"task_id": "task_2", "title": "Caf\u00e9", "description": null, "status": "completed"}`, false},
		{env.Assistant, "update_task_status", `{"task_id": "task_9", "status": "completed"}`, `Error: Task task_9 not found`, true},
		{env.Assistant, "transfer_to_human_agents", `{"summary": "s"}`, `Transfer successful`, false},
		{env.User, "check_notifications", "", `[{"notification_id": "notif_1", "message": "Task 'Test task' has been assigned to you.", "status": "unread", "task_id": "task_1"}]`, false},
		{env.User, "dismiss_notification", `{"notification_id": "notif_1"}`, `Notification notif_1 dismissed`, false},
		{env.User, "dismiss_notification", `{"notification_id": "x"}`, `Error: Notification x not found`, true},
		{env.User, "get_users", "", `Error: Tool 'get_users' not found.`, true},
	} {
		got, isErr := e.Call(c.req, c.name, c.args)
		if got != c.want || isErr != c.isErr {
			t.Errorf("%s %s(%s) = (%q, %v), want (%q, %v)", c.req, c.name, c.args, got, isErr, c.want, c.isErr)
		}
	}
	solo, err := env.New("mock", env.Options{DataDir: dir, Solo: true})
	if err != nil || !solo.Solo || len(solo.Tools()) != 6 {
		t.Fatalf("solo env: %v", err)
	}
	if out, isErr := solo.Call(env.Assistant, "check_notifications", ""); isErr {
		t.Fatalf("solo user tool: %s", out)
	}
}

func TestCheckSchemasDetectsDifferences(t *testing.T) {
	dir := tau2test.DataDir(t)
	tools := slices.Clone(AgentToolkit.Tools())
	slices.Reverse(tools)
	reordered := env.MustToolkit("MockTools", tools)
	if err := env.CheckSchemas(dir, "mock", reordered, UserToolkit); err == nil {
		t.Fatal("reordered tools passed")
	}
	if err := env.CheckSchemas(dir, "mock", AgentToolkit, nil); err == nil {
		t.Fatal("missing user tools passed")
	}
}
