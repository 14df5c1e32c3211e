package episode

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"tau2rl/producers/chattemplate"
	"tau2rl/producers/tokenizer"
)

// TestIncrementalFromPrefixEqualsChattemplate: the cached-prefix history
// produces exactly chattemplate.New's incremental prompts, call after call.
func TestIncrementalFromPrefixEqualsChattemplate(t *testing.T) {
	dir, err := tokenizer.LocateQwen3()
	if errors.Is(err, tokenizer.ErrNotFound) {
		t.Skip("Qwen3 tokenizer not found")
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "get_user_details", "description": "Get the details of a user, including their reservations.", "parameters": {"properties": {"user_id": {"description": "The user ID, such as 'sara_doe_496'.", "title": "User Id", "type": "string"}}, "required": ["user_id"], "title": "parameters", "type": "object"}}}`), ThinkToolSchema()}
	off := false
	for _, tc := range []struct {
		name     string
		initial  []chattemplate.Message
		first    []chattemplate.Message
		thinking *bool
	}{
		{"greeting", []chattemplate.Message{{Role: "system", Content: AgentSystemPrompt("Policy: be nice.\n\n## Rules\n- one\n")}, {Role: "assistant", Content: Greeting}},
			[]chattemplate.Message{{Role: "user", Content: "Hi, I want to cancel reservation EHGLP3. Ça va? 🙂"}}, nil},
		{"thinking off", []chattemplate.Message{{Role: "system", Content: AgentSystemPrompt("P")}, {Role: "assistant", Content: Greeting}},
			[]chattemplate.Message{{Role: "user", Content: "hello\n\nthere  "}}, &off},
		{"solo", []chattemplate.Message{{Role: "system", Content: SoloSystemPrompt("P", nil)}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := chattemplate.Options{Tools: tools, EnableThinking: tc.thinking}
			ref, err := chattemplate.New(chattemplate.ModeIncremental, tok, slices.Concat(tc.initial, tc.first), opts)
			if err != nil {
				t.Fatal(err)
			}
			prefixText, err := chattemplate.Render(tc.initial, opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := newIncremental(tok, tok.Encode(prefixText), tc.initial, tc.first, opts)
			if err != nil {
				t.Fatal(err)
			}
			imEnd, _ := tok.AddedTokenID(chattemplate.IMEnd)
			steps := []struct {
				completion string
				next       []chattemplate.Message
			}{
				{"<think>\nI should look the user up.\n</think>\n\n<tool_call>\n{\"name\": \"get_user_details\", \"arguments\": {\"user_id\": \"raj_1\"}}\n</tool_call>",
					[]chattemplate.Message{{Role: "tool", Content: `{"user_id": "raj_1", "name": "Raj"}`}}},
				{"<tool_call>\n{\"name\": \"think\", \"arguments\": {\"thoughts\": \"x\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_user_details\", \"arguments\": {}}\n</tool_call>",
					[]chattemplate.Message{{Role: "tool", Content: ThinkResult}, {Role: "tool", Content: "Error: missing"}}},
				{"Done, your reservation is cancelled.", []chattemplate.Message{{Role: "user", Content: "Thanks ###STOP###"}}},
			}
			for i, st := range steps {
				if !slices.Equal(got.Prompt(), ref.Prompt()) {
					t.Fatalf("step %d: prompts differ (%d vs %d tokens)", i, len(got.Prompt()), len(ref.Prompt()))
				}
				ids := append(tok.Encode(st.completion), imEnd)
				c1, err1 := got.AddCompletion(ids)
				c2, err2 := ref.AddCompletion(ids)
				if err1 != nil || err2 != nil || c1.Invalid != c2.Invalid || len(c1.ToolCalls) != len(c2.ToolCalls) {
					t.Fatalf("step %d: completions %+v %v / %+v %v", i, c1, err1, c2, err2)
				}
				if err := got.AddMessages(st.next...); err != nil {
					t.Fatal(err)
				}
				if err := ref.AddMessages(st.next...); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got.Prompt(), ref.Prompt()) {
				t.Fatal("final prompts differ")
			}
			if len(got.Messages()) != len(ref.Messages()) {
				t.Errorf("messages %d vs %d", len(got.Messages()), len(ref.Messages()))
			}
		})
	}
}
