package chattemplate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseCompletion(t *testing.T) {
	type want struct {
		reasoning string
		thinking  bool
		content   string
		calls     []string // name + " " + compact args
		invalid   string   // substring of the reason; "" = valid
	}
	for _, c := range []struct {
		name, in string
		want     want
	}{
		{"plain", "Hello there.", want{content: "Hello there."}},
		{"empty", "", want{}},
		{"thinking", "<think>\nLet me check.\n</think>\n\nSure.", want{reasoning: "Let me check.", thinking: true, content: "Sure."}},
		{"empty thinking", "<think>\n\n</think>\n\nHi", want{thinking: true, content: "Hi"}},
		{"close only", "reasoning without open\n</think>\n\nanswer", want{reasoning: "reasoning without open", thinking: true, content: "answer"}},
		{"one call", "<tool_call>\n{\"name\": \"get_user_details\", \"arguments\": {\"user_id\": \"mia_li_3668\"}}\n</tool_call>",
			want{calls: []string{`get_user_details {"user_id":"mia_li_3668"}`}}},
		{"think then two calls", "<think>\nplan\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>",
			want{reasoning: "plan", thinking: true, content: "Checking.", calls: []string{`a {}`, `b {"x":[1,2]}`}}},
		{"missing arguments", `<tool_call>{"name": "transfer_to_human_agents"}</tool_call>`, want{calls: []string{`transfer_to_human_agents {}`}}},
		{"text after call", "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nDone.", want{content: "Done.", calls: []string{`a {}`}}},
		{"bad json", "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": }\n</tool_call>", want{invalid: "invalid JSON"}},
		{"missing name", `<tool_call>{"arguments": {}}</tool_call>`, want{invalid: `missing "name"`}},
		{"empty name", `<tool_call>{"name": " ", "arguments": {}}</tool_call>`, want{invalid: `empty "name"`}},
		{"name not string", `<tool_call>{"name": 3, "arguments": {}}</tool_call>`, want{invalid: `not a string`}},
		{"args string", `<tool_call>{"name": "a", "arguments": "{\"x\": 1}"}</tool_call>`, want{invalid: "not a JSON object"}},
		{"args null", `<tool_call>{"name": "a", "arguments": null}</tool_call>`, want{invalid: "not a JSON object"}},
		{"body array", `<tool_call>[1]</tool_call>`, want{invalid: "invalid JSON"}},
		{"body null", `<tool_call>null</tool_call>`, want{invalid: "null"}},
		{"two objects", `<tool_call>{"name": "a", "arguments": {}} {"name": "b"}</tool_call>`, want{invalid: "text after"}},
		{"unterminated call", "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}", want{invalid: "unterminated <tool_call>"}},
		{"nested call", "<tool_call><tool_call>{}</tool_call>", want{invalid: "nested"}},
		{"stray close", "hello </tool_call>", want{content: "hello", invalid: "</tool_call> without"}},
		{"unterminated think", "<think>\nthinking forever", want{reasoning: "thinking forever", thinking: true, invalid: "unterminated <think>"}},
		{"two think blocks", "<think>a</think>b<think>c</think>d", want{reasoning: "a", thinking: true, content: "b<think>c</think>d", invalid: "more than one"}},
		{"think after text", "hi <think>a</think>b", want{reasoning: "hi <think>a", thinking: true, content: "b", invalid: "after other text"}},
		{"im_start", "Sure.<|im_start|>user\nhi", want{content: "Sure.<|im_start|>user\nhi", invalid: "<|im_start|>"}},
		{"tool response", "<tool_response>\nfake\n</tool_response>", want{content: "<tool_response>\nfake\n</tool_response>", invalid: "<tool_response>"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ParseCompletion(c.in)
			if c.want.invalid == "" && !got.Valid() {
				t.Fatalf("invalid: %s", got.Invalid)
			}
			if c.want.invalid != "" && !strings.Contains(got.Invalid, c.want.invalid) {
				t.Fatalf("Invalid = %q, want it to contain %q", got.Invalid, c.want.invalid)
			}
			if got.Reasoning != c.want.reasoning || got.HasThinking != c.want.thinking || got.Content != c.want.content {
				t.Errorf("got reasoning %q (%v) content %q; want %q (%v) %q", got.Reasoning, got.HasThinking, got.Content, c.want.reasoning, c.want.thinking, c.want.content)
			}
			if c.want.invalid != "" {
				return
			}
			var calls []string
			for _, tc := range got.ToolCalls {
				var v any
				if err := json.Unmarshal(tc.Function.Arguments, &v); err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(v)
				calls = append(calls, tc.Function.Name+" "+string(b))
			}
			if strings.Join(calls, "|") != strings.Join(c.want.calls, "|") {
				t.Errorf("calls %q, want %q", calls, c.want.calls)
			}
		})
	}
}

// TestParseRenderRoundTrip: a rendered assistant turn parses back into the
// message that produced it.
func TestParseRenderRoundTrip(t *testing.T) {
	m := Message{Role: RoleAssistant, ReasoningContent: Ptr("step 1\nstep 2"), Content: "Let me look.", ToolCalls: []ToolCall{
		call("", "get_user_details", `{"user_id": "x"}`), call("", "book", `{"p": [{"a": 1}], "s": "é\n"}`)}}
	text, err := Render([]Message{{Role: RoleUser, Content: "q"}, m}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := text[strings.Index(text, "<|im_start|>assistant\n")+len("<|im_start|>assistant\n"):]
	body = strings.TrimSuffix(body, "<|im_end|>\n")
	c := ParseCompletion(body)
	if !c.Valid() || c.Reasoning != *m.ReasoningContent || c.Content != m.Content || len(c.ToolCalls) != 2 {
		t.Fatalf("round trip: %+v", c)
	}
	again, err := Render([]Message{{Role: RoleUser, Content: "q"}, c.Message()}, Options{})
	if err != nil || again != text {
		t.Fatalf("re-render differs: %v\n%q\n%q", err, again, text)
	}
}

func FuzzParseCompletion(f *testing.F) {
	for _, s := range []string{
		"Hello", "<think>\nx\n</think>\n\ny", "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"b\": 1}}\n</tool_call>",
		"<tool_call>{", "</tool_call>", "<think>", "</think></think>", "<tool_call>{\"name\":\"\"}</tool_call>",
		"<|im_end|>", "<tool_call>\n{\"name\": \"a\"}\n</tool_call><tool_call>[]</tool_call>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := ParseCompletion(s)
		if !c.Valid() {
			return
		}
		for _, tc := range c.ToolCalls {
			if strings.TrimSpace(tc.Function.Name) == "" {
				t.Fatalf("valid result with empty tool name for %q", s)
			}
			var obj map[string]any
			if err := json.Unmarshal(tc.Function.Arguments, &obj); err != nil || obj == nil {
				t.Fatalf("valid result with non-object arguments %q for %q", tc.Function.Arguments, s)
			}
		}
		if strings.Contains(c.Content, ToolCallOpen) || strings.Contains(c.Content, ToolCallClose) {
			t.Fatalf("valid result with tool-call tags left in content for %q", s)
		}
		// A valid completion renders (as the last assistant turn) without error.
		if _, err := Render([]Message{{Role: RoleUser, Content: "q"}, c.Message()}, Options{}); err != nil {
			t.Fatalf("render of parsed %q: %v", s, err)
		}
	})
}

func TestParseRendered(t *testing.T) {
	for _, c := range handRenderCases() {
		text, err := Render(c.Messages, Options{Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, EnableThinking: c.EnableThinking})
		if err != nil {
			t.Fatal(err)
		}
		if c.Messages[0].Role == RoleTool || c.Name == "string arguments" || c.Name == "tool response as user" || untrimmedAssistant(c.Messages) {
			// Not invertible: tool first, non-JSON string arguments, user text
			// that looks like a tool result, assistant content with
			// surrounding whitespace (ParseCompletion trims it).
			continue
		}
		r, err := ParseRendered(text)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if r.OpenAssistant != c.AddGenerationPrompt || len(r.Tools) != len(c.Tools) {
			t.Errorf("%s: open %v tools %d", c.Name, r.OpenAssistant, len(r.Tools))
		}
		// Re-rendering the parsed messages gives the same text, except for
		// thinking the template already dropped.
		again, err := Render(r.Messages, Options{Tools: r.Tools, AddGenerationPrompt: c.AddGenerationPrompt, EnableThinking: c.EnableThinking})
		if err != nil {
			t.Fatalf("%s: re-render: %v", c.Name, err)
		}
		if again != text {
			t.Errorf("%s: re-render differs:\n got %q\nwant %q", c.Name, again, text)
		}
	}
	for _, bad := range []string{"", "hello", "<|im_start|>user\nunclosed", "<|im_start|>robot\nx<|im_end|>\n",
		"<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\nnot json<|im_end|>\n"} {
		if _, err := ParseRendered(bad); err == nil {
			t.Errorf("ParseRendered(%q): want error", bad)
		}
	}
}

func FuzzParseRendered(f *testing.F) {
	f.Add("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n")
	f.Add("<|im_start|>user\n<tool_response>\na\n</tool_response>\n<tool_response>\nb\n</tool_response><|im_end|>\n")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRendered(s)
		if err != nil {
			return
		}
		for _, m := range r.Messages {
			switch m.Role {
			case RoleSystem, RoleUser, RoleAssistant, RoleTool:
			default:
				t.Fatalf("unexpected role %q", m.Role)
			}
		}
	})
}

func untrimmedAssistant(msgs []Message) bool {
	for _, m := range msgs {
		if m.Role == RoleAssistant {
			c, _ := splitThinking(m)
			if c != strings.TrimSpace(c) {
				return true
			}
		}
	}
	return false
}
