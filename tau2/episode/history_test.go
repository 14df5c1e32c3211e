package episode

import (
	"encoding/json"
	"slices"
	"testing"

	"tau2rl/lib/inference/tokenizer/tokenizertest"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/schemas"
)

// TestAgentHistoryFromCachedPrefix: the token agent's incremental history
// is chattemplate's Incremental (whose later prompts prefix_test.go there
// checks), started from the factory's cached prefix (built by the first
// agent of a prompt, reused by the next) with the same first prompt as
// chattemplate.New on the whole conversation; rerender mode is New's.
func TestAgentHistoryFromCachedPrefix(t *testing.T) {
	tok := tokenizertest.Qwen3(t)
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "get_user_details", "description": "Get the details of a user, including their reservations.", "parameters": {"properties": {"user_id": {"description": "The user ID, such as 'sara_doe_496'.", "title": "User Id", "type": "string"}}, "required": ["user_id"], "title": "parameters", "type": "object"}}}`), ThinkToolSchema()}
	off := false
	for _, tc := range []struct {
		name     string
		mode     chattemplate.Mode
		initial  []chattemplate.Message
		first    []chattemplate.Message
		thinking *bool
	}{
		{"greeting", "", []chattemplate.Message{{Role: "system", Content: AgentSystemPrompt("Policy: be nice.\n\n## Rules\n- one\n")}, {Role: "assistant", Content: Greeting}},
			[]chattemplate.Message{{Role: "user", Content: "Hi, I want to cancel reservation EHGLP3. Ça va? 🙂"}}, nil},
		{"thinking off", chattemplate.ModeIncremental, []chattemplate.Message{{Role: "system", Content: AgentSystemPrompt("P")}, {Role: "assistant", Content: Greeting}},
			[]chattemplate.Message{{Role: "user", Content: "hello\n\nthere  "}}, &off},
		{"solo", "", []chattemplate.Message{{Role: "system", Content: SoloSystemPrompt("P", nil)}}, nil, nil},
		{"rerender", chattemplate.ModeRerender, []chattemplate.Message{{Role: "system", Content: AgentSystemPrompt("P")}, {Role: "assistant", Content: Greeting}},
			[]chattemplate.Message{{Role: "user", Content: "hello"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := chattemplate.Options{Tools: tools, EnableThinking: tc.thinking}
			ref, err := chattemplate.New(tc.mode, tok, slices.Concat(tc.initial, tc.first), opts)
			if err != nil {
				t.Fatal(err)
			}
			f := &TokenAgentFactory{Tokenizer: tok, Mode: tc.mode, EnableThinking: tc.thinking}
			spec := AgentSpec{System: tc.initial[0].Content, Tools: tools}
			for _, m := range tc.initial[1:] {
				spec.Initial = append(spec.Initial, schemas.Message{Role: schemas.Role(m.Role), Content: m.Content})
			}
			for agent := range 2 {
				h, err := f.newHistory(spec, tc.first)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(h.Prompt(), ref.Prompt()) {
					t.Fatalf("agent %d: first prompt differs from chattemplate.New (%d vs %d tokens)", agent, len(h.Prompt()), len(ref.Prompt()))
				}
				if len(h.Messages()) != len(ref.Messages()) {
					t.Errorf("agent %d: %d messages, want %d", agent, len(h.Messages()), len(ref.Messages()))
				}
				_, incremental := h.(*chattemplate.Incremental)
				if incremental != (tc.mode != chattemplate.ModeRerender) {
					t.Errorf("agent %d: mode %q gave a %T", agent, tc.mode, h)
				}
			}
			cached := f.prefixes.Len()
			if want := map[bool]int{true: 0, false: 1}[tc.mode == chattemplate.ModeRerender]; cached != want {
				t.Errorf("%d cached prefixes after two agents of one prompt, want %d", cached, want)
			}
		})
	}
}
