package proxy_test

import (
	"slices"
	"testing"
	"time"

	"tau2rl/producers/proxy"
	"tau2rl/schemas"
)

// responsesItem is an input or output item as the openai SDK client holds it.
type responsesItem struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content any    `json:"content"`
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	Args    string `json:"arguments"`
	Output  string `json:"output"`
}

// The official openai npm package drives a τ² airline tool loop through the
// proxy's Responses API (client.responses.create and client.responses.stream,
// whose accumulator checks every event's item ids, indexes and sequence
// numbers): full input each time, previous_response_id with only the new
// items, streamed, and a max_output_tokens cut (status incomplete) then
// "please continue". The trajectory is token-exact against what the
// scripted SGLang server received, every prompt extends the previous call's
// prompt and completion (no drift), and it holds the client's conversation:
// its call_ids, function names, arguments, outputs and texts.
func TestResponsesNodeClient(t *testing.T) {
	needNodeClients(t)
	cases := []struct {
		scenario string
		statuses []string
		final    string
	}{
		{"full", []string{"completed", "completed", "completed"}, "I found both reservations; they are confirmed."},
		{"previous", []string{"completed", "completed", "completed"}, "I found both reservations; they are confirmed."},
		{"stream", []string{"completed", "completed", "completed"}, "I found both reservations; they are confirmed."},
		{"incomplete", []string{"completed", "incomplete", "completed"}, "Done."},
	}
	for _, tc := range cases {
		t.Run(tc.scenario, func(t *testing.T) {
			e := airlineEnv(t)
			t.Setenv("TAU2_PROXY_TEST_KEYS", "sk-test")
			h := newHarness(t, airlineScript(), func(c *proxy.Config) { c.Auth = proxy.AuthConfig{APIKeysEnv: "TAU2_PROXY_TEST_KEYS"} })
			sid := "responses-" + tc.scenario
			var out struct {
				Input        []responsesItem   `json:"input"`
				Outputs      [][]responsesItem `json:"outputs"`
				Statuses     []string          `json:"statuses"`
				FinalText    string            `json:"finalText"`
				StreamEvents int               `json:"streamEvents"`
			}
			runNode(t, "responses.mjs", map[string]any{"baseURL": h.url + "/v1", "apiKey": "sk-test;session=" + sid + ";task=airline-7;group=g1",
				"toolsURL": toolServer(t, e), "system": "You are an airline agent.", "user": "What are my reservations? I am " + airlineUser,
				"scenario": tc.scenario}, &out)
			if !slices.Equal(out.Statuses, tc.statuses) {
				t.Fatalf("statuses %v, want %v", out.Statuses, tc.statuses)
			}
			if streamed := tc.scenario == "stream" || tc.scenario == "incomplete"; streamed != (out.StreamEvents > 0) {
				t.Fatalf("%d stream events", out.StreamEvents)
			}
			h.finish(t, sid, 1)
			trajs := trajectories(t, h.kc, 1, 10*time.Second)
			if len(trajs) != 1 {
				t.Fatalf("%d trajectories published, want 1", len(trajs))
			}
			tr := archive(t, trajs)[0]
			if tr.TaskID != "airline-7" || tr.RequestID != "g1" || tr.Status != schemas.StatusOK || tr.Reward != 1 || tr.Tags["template_drift"] != "" {
				t.Fatalf("trajectory task %q group %q status %q reward %v tags %v", tr.TaskID, tr.RequestID, tr.Status, tr.Reward, tr.Tags)
			}
			checkTokenExact(t, h.tok, tr, h.got.all(), nil)
			checkResponsesConversation(t, tr, out.Input)
			last := tr.Messages[len(tr.Messages)-1]
			if out.FinalText != tc.final || last.Content != out.FinalText {
				t.Fatalf("final answer %q (trajectory %q), want %q", out.FinalText, last.Content, tc.final)
			}
			// The final answer's thinking (a tool call inside <think>: still
			// thinking) comes back as a reasoning item before the message.
			final := out.Outputs[len(out.Outputs)-1]
			if tc.scenario != "incomplete" && (len(final) != 2 || final[0].Type != "reasoning" || final[1].Type != "message" || last.Reasoning != fakeToolCallInThinking) {
				t.Fatalf("final output items %s, reasoning %q: want reasoning, message", jsonString(final), last.Reasoning)
			}
			if tc.scenario == "incomplete" {
				if c := tr.Calls[1]; h.got.max[1] != 20 || len(c.CompletionTokens) != 20 || c.FinishReason != "length" {
					t.Fatalf("max_output_tokens 20: server budget %d, %d tokens, finish %q", h.got.max[1], len(c.CompletionTokens), c.FinishReason)
				}
			}
		})
	}
}

// checkResponsesConversation checks the trajectory's conversation against
// the items the client holds: after the instructions (the system message),
// one message per user, function_call_output and assistant turn, where an
// assistant turn is the reasoning, message and function_call items of one
// response, in order; call ids, names, arguments, outputs and texts equal.
func checkResponsesConversation(t *testing.T, tr *schemas.Trajectory, input []responsesItem) {
	t.Helper()
	msgs := tr.Messages
	if len(msgs) == 0 || msgs[0].Role != schemas.RoleSystem || msgs[0].Content != "You are an airline agent." {
		t.Fatalf("first message %s: want the instructions as the system message", jsonString(msgs[:min(1, len(msgs))]))
	}
	k := 1
	var turn *schemas.Message // the assistant turn items are collected into
	next := func(role schemas.Role) *schemas.Message {
		if k >= len(msgs) || msgs[k].Role != role {
			t.Fatalf("trajectory message %d: want a %s message (trajectory %s)", k, role, jsonString(msgs))
		}
		k++
		return &msgs[k-1]
	}
	calls := 0
	for i, it := range input {
		switch {
		case it.Role == "user":
			turn = nil
			if m := next(schemas.RoleUser); m.Content != it.Content {
				t.Fatalf("item %d: user %q, trajectory %q", i, it.Content, m.Content)
			}
		case it.Type == "function_call_output":
			turn = nil
			if m := next(schemas.RoleTool); m.ToolCallID != it.CallID || m.Content != it.Output {
				t.Fatalf("item %d: output for %s, trajectory %s", i, it.CallID, jsonString(m))
			}
		case it.Type == "reasoning":
			turn = next(schemas.RoleAssistant)
			calls = 0
		case it.Type == "message" && it.Role == "assistant":
			if turn == nil {
				turn, calls = next(schemas.RoleAssistant), 0
			}
			parts, _ := it.Content.([]any)
			if len(parts) != 1 || parts[0].(map[string]any)["text"] != turn.Content {
				t.Fatalf("item %d: assistant content %v, trajectory %q", i, it.Content, turn.Content)
			}
		case it.Type == "function_call":
			if turn == nil {
				turn, calls = next(schemas.RoleAssistant), 0
			}
			if calls >= len(turn.ToolCalls) {
				t.Fatalf("item %d: call %s beyond the trajectory turn's %d calls", i, it.CallID, len(turn.ToolCalls))
			}
			if tc := turn.ToolCalls[calls]; tc.ID != it.CallID || tc.Name != it.Name || tc.Arguments != it.Args {
				t.Fatalf("item %d: call %s %s(%s), trajectory %s", i, it.CallID, it.Name, it.Args, jsonString(tc))
			}
			calls++
		default:
			t.Fatalf("item %d: unexpected %s", i, jsonString(it))
		}
	}
	if k != len(msgs) {
		t.Fatalf("trajectory has %d messages, the client's items make %d", len(msgs), k)
	}
}

// The OpenAI Agents SDK with its default model provider (the Responses
// API), unmodified, streamed and not, and chained (a second run continuing
// the first's last response by previousResponseId, the SDK sending only the
// new items): it runs to its final output and its trajectory is token-exact,
// every prompt extending the previous call's (no drift).
func TestResponsesAgentsSDK(t *testing.T) {
	needNodeClients(t)
	const final = "I found both reservations; they are confirmed."
	for _, tc := range []struct {
		name   string
		stream bool
		chain  string
		calls  int
	}{{"create", false, "", 3}, {"stream", true, "", 3}, {"chained", false, "Thanks. Look again, please.", 6}} {
		t.Run(tc.name, func(t *testing.T) {
			e := airlineEnv(t)
			h := newHarness(t, airlineScript())
			var out struct {
				FinalOutput string `json:"finalOutput"`
				Items       int    `json:"items"`
				Chained     string `json:"chained"`
				Previous    int    `json:"sentPrevious"`
			}
			sid := "agents-responses-" + tc.name
			runNode(t, "agents_responses.mjs", map[string]any{"baseURL": h.url + "/v1", "apiKey": "sk-any;session=" + sid + ";task=airline-7",
				"toolsURL": toolServer(t, e), "system": "You are an airline agent.", "user": "What are my reservations? I am " + airlineUser,
				"stream": tc.stream, "chain": tc.chain}, &out)
			if out.FinalOutput != final || (tc.chain != "" && out.Chained != final) {
				t.Fatalf("final output %q, chained %q", out.FinalOutput, out.Chained)
			}
			if wantPrev := map[bool]int{false: 0, true: 3}[tc.chain != ""]; out.Previous != wantPrev {
				t.Fatalf("%d requests carried previous_response_id, want %d", out.Previous, wantPrev)
			}
			h.finish(t, sid, 0.5)
			trajs := trajectories(t, h.kc, 1, 10*time.Second)
			if len(trajs) != 1 {
				t.Fatalf("%d trajectories", len(trajs))
			}
			tr := archive(t, trajs)[0]
			checkTokenExact(t, h.tok, tr, h.got.all(), nil)
			if len(tr.Calls) != tc.calls || tr.Reward != 0.5 || tr.Tags["template_drift"] != "" {
				t.Fatalf("%d calls (want %d), reward %v, tags %v", len(tr.Calls), tc.calls, tr.Reward, tr.Tags)
			}
		})
	}
}
