package episode

import (
	"strings"
	"testing"
	"time"

	"tau2rl/schemas"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/pyjson"
)

func parseJSONHistory(t testing.TB, js string) ([]evaluator.Message, error) {
	t.Helper()
	v, err := pyjson.Loads(js)
	if err != nil {
		t.Fatal(err)
	}
	return evaluator.ParseMessages(v)
}

const (
	hUser     = `{"role": "user", "content": "hi"}`
	hUserStop = `{"role": "user", "content": "bye ###TRANSFER###"}`
	hUserCall = `{"role": "user", "tool_calls": [{"id": "u1", "name": "check_notifications", "arguments": {}, "requestor": "user"}]}`
	hUserRes  = `{"role": "tool", "id": "u1", "content": "[]", "requestor": "user"}`
	hCall     = `{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "name": "get_users", "arguments": {"n": 1.0, "s": "é"}}]}`
	hRes      = `{"role": "tool", "id": "c1", "content": "{}"}`
	hText     = `{"role": "assistant", "content": "done"}`
	hStop     = `{"role": "assistant", "content": "###STOP###"}`
)

func viewRoles(msgs []schemas.Message) string {
	var r []string
	for _, m := range msgs {
		r = append(r, string(m.Role))
	}
	return strings.Join(r, " ")
}

// TestNewResumption checks τ²'s initialize routing for every kind of last
// message, the views each party starts with, and the pending message.
func TestNewResumption(t *testing.T) {
	for _, tc := range []struct {
		name, history string
		solo          bool
		from, to      role
		termination   string
		agent, user   string
		wantErr       string
	}{
		{name: "agent text → user", history: "[" + hUser + "," + hCall + "," + hRes + "," + hText + "]",
			from: roleAgent, to: roleUser, agent: "user assistant tool assistant", user: "user"},
		{name: "agent call → env", history: "[" + hUser + "," + hCall + "]",
			from: roleAgent, to: roleEnv, agent: "user assistant", user: "user"},
		{name: "user text → agent", history: "[" + hText + "," + hUser + "]",
			from: roleUser, to: roleAgent, agent: "assistant", user: "assistant user"},
		{name: "user stop", history: "[" + hText + "," + hUserStop + "]",
			from: roleUser, to: roleAgent, termination: schemas.TerminationUserStop, agent: "assistant", user: "assistant user"},
		{name: "user call → env", history: "[" + hText + "," + hUserCall + "]",
			from: roleUser, to: roleEnv, agent: "assistant", user: "assistant user"},
		{name: "user's result → user", history: "[" + hText + "," + hUserCall + "," + hUserRes + "]",
			from: roleEnv, to: roleUser, agent: "assistant", user: "assistant user"},
		{name: "agent's result → agent", history: "[" + hUser + "," + hCall + "," + hRes + "]",
			from: roleEnv, to: roleAgent, agent: "user assistant", user: "user"},
		{name: "non-solo agent never stops", history: "[" + hUser + "," + hStop + "]",
			from: roleAgent, to: roleUser, agent: "user assistant", user: "user"},
		{name: "solo stop", history: "[" + hCall + "," + hRes + "," + hStop + "]", solo: true,
			from: roleAgent, to: roleUser, termination: schemas.TerminationAgentStop, agent: "assistant tool assistant", user: ""},
		{name: "solo result → agent", history: "[" + hCall + "," + hRes + "]", solo: true,
			from: roleEnv, to: roleAgent, agent: "assistant", user: ""},
		{name: "solo text → user", history: "[" + hCall + "," + hRes + "," + hText + "]", solo: true, wantErr: "solo mode has no user"},
		{name: "empty tool_calls last", history: `[{"role": "assistant", "content": "x", "tool_calls": []}]`, wantErr: "empty tool_calls list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hist, err := parseJSONHistory(t, tc.history)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
			res, err := newResumption(hist, tc.solo, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.from != tc.from || res.to != tc.to || res.termination != tc.termination {
				t.Errorf("from %d to %d termination %q, want %d %d %q", res.from, res.to, res.termination, tc.from, tc.to, tc.termination)
			}
			if got := viewRoles(res.agentView); got != tc.agent {
				t.Errorf("agent view %q, want %q", got, tc.agent)
			}
			if got := viewRoles(res.userView); got != tc.user {
				t.Errorf("user view %q, want %q", got, tc.user)
			}
			n := len(hist)
			if len(res.msgs) != n || len(res.pending) != 1 || res.pending[0].Turn != res.msgs[n-1].Turn || res.pending[0].Content != res.msgs[n-1].Content {
				t.Errorf("%d messages, pending %+v", len(res.msgs), res.pending)
			}
			for i, m := range res.msgs {
				if want := now.Add(time.Duration(i-n) * time.Second); !m.Timestamp.Equal(want) {
					t.Errorf("message %d: timestamp %s, want %s", i, m.Timestamp, want)
				}
				if m.CallIndex != -1 {
					t.Errorf("message %d: call index %d", i, m.CallIndex)
				}
			}
		})
	}
}

// TestTrajectoryMessage: history tool calls carry json.dumps(arguments)
// (Python separators, ensure_ascii, float repr) and τ²'s default requestor;
// tool results keep id, requestor and error.
func TestTrajectoryMessage(t *testing.T) {
	hist, err := parseJSONHistory(t, "["+hCall+`, {"role": "tool", "id": "c1", "content": "boom", "error": true}, `+hUserCall+"]")
	if err != nil {
		t.Fatal(err)
	}
	m, err := trajectoryMessage(&hist[0])
	if err != nil {
		t.Fatal(err)
	}
	want := schemas.ToolCall{ID: "c1", Name: "get_users", Arguments: `{"n": 1.0, "s": "\u00e9"}`, Requestor: "assistant"}
	if m.Role != schemas.RoleAssistant || m.Content != "" || len(m.ToolCalls) != 1 || m.ToolCalls[0] != want {
		t.Errorf("call message %+v, want tool call %+v", m, want)
	}
	r, err := trajectoryMessage(&hist[1])
	if err != nil {
		t.Fatal(err)
	}
	if r.Role != schemas.RoleTool || r.ToolCallID != "c1" || r.Requestor != "assistant" || !r.ToolError || r.Content != "boom" {
		t.Errorf("tool message %+v", r)
	}
	u, err := trajectoryMessage(&hist[2])
	if err != nil {
		t.Fatal(err)
	}
	if u.ToolCalls[0].Requestor != "user" || u.ToolCalls[0].Arguments != "{}" {
		t.Errorf("user call %+v", u.ToolCalls[0])
	}
	// Back through the grading conversion: the same arguments.
	em := EvaluatorMessages([]schemas.Message{m})[0]
	if got := pyjson.MustDumps(em.ToolCalls[0].Arguments); got != want.Arguments || em.Content != nil {
		t.Errorf("evaluator form: arguments %s content %v", got, em.Content)
	}
}

// TestValidateHistory is τ²'s validate_message_history, quirk included.
func TestValidateHistory(t *testing.T) {
	for _, tc := range []struct {
		name, history, wantErr string
	}{
		{"valid", "[" + hUser + "," + hCall + "," + hRes + "," + hText + "," + hUserCall + "," + hUserRes + "]", ""},
		{"system", `[{"role": "system", "content": "s"}]`, "invalid message type"},
		{"multi-tool", `[{"role": "tool", "tool_messages": []}]`, "multi-tool"},
		{"empty", `[{"role": "assistant", "content": " \n"}]`, "must have either content or tool_calls"},
		{"no content", `[{"role": "user"}]`, "must have either content or tool_calls"},
		{"orphan result", "[" + hUser + "," + hRes + "]", "no tool messages expected"},
		{"wrong requestor", "[" + hCall + "," + hUserRes + "]", "got tool message from user, expected assistant"},
		{"missing result", "[" + hCall + "," + hUserCall + "]", "1 tool messages are missing"},
		// τ² does not reset the expected count at a text message: a later
		// call still reports the result missing before the text.
		{"count not reset", "[" + hCall + "," + hText + "," + hCall + "," + hRes + "]", "1 tool messages are missing"},
		{"extra result", "[" + hCall + "," + hRes + "," + hRes + "]", "no tool messages expected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hist, err := parseJSONHistory(t, tc.history)
			if err != nil {
				t.Fatal(err)
			}
			err = validateHistory(hist)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzResumption feeds arbitrary message_history JSON through the parser,
// the validation and the routing: never a panic; an accepted history gives
// one trajectory message per history message, the last one pending, and
// views no longer than the history.
func FuzzResumption(f *testing.F) {
	for _, s := range []string{
		"[" + hUser + "," + hCall + "," + hRes + "," + hText + "]",
		"[" + hText + "," + hUserCall + "," + hUserRes + "]",
		"[" + hCall + "," + hRes + "," + hStop + "]",
		"[" + hUserStop + "]",
		`[{"role": "assistant", "content": "x", "tool_calls": []}]`,
		`[{"role": "tool", "tool_messages": [{"role": "tool", "id": "a", "content": "b"}]}]`,
		`[null]`, `[]`, `{}`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, js string, solo bool) {
		v, err := pyjson.Loads(js)
		if err != nil {
			return
		}
		hist, err := evaluator.ParseMessages(v)
		if err != nil || len(hist) == 0 {
			return
		}
		if err := validateHistory(hist); err != nil {
			return
		}
		res, err := newResumption(hist, solo, time.Unix(1e9, 0))
		if err != nil {
			return
		}
		if len(res.msgs) != len(hist) || len(res.pending) != 1 || len(res.agentView) > len(hist) || len(res.userView) > len(hist) {
			t.Fatalf("resumption of %d messages: %d msgs, %d pending, views %d/%d", len(hist), len(res.msgs), len(res.pending), len(res.agentView), len(res.userView))
		}
		if solo && res.to == roleUser && res.termination == "" {
			t.Fatal("solo resumption hands the turn to the user")
		}
	})
}
