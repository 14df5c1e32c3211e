package chattemplate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// renderCase is one template input, in the JSON shape the npm oracle reads.
type renderCase struct {
	Name                string            `json:"name"`
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools,omitempty"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	EnableThinking      *bool             `json:"enable_thinking,omitempty"`
	Text                string            `json:"text,omitempty"` // expected (golden)
}

func bptr(b bool) *bool { return &b }

func mustTool(name, desc, params string) json.RawMessage {
	t, err := Tool(name, desc, json.RawMessage(params))
	if err != nil {
		panic(err)
	}
	return t
}

// fixtureTools are small tools of our own in τ²'s shape (pydantic-style
// schemas), with the characters tojson must handle.
var fixtureTools = []json.RawMessage{
	mustTool("get_user_details", "Get the details of a user, including their reservations.",
		`{"properties": {"user_id": {"description": "The user ID, such as 'sara_doe_496'.", "title": "User Id", "type": "string"}}, "required": ["user_id"], "title": "parameters", "type": "object"}`),
	mustTool("book_flight", "Book a flight — prices in €; \"quotes\", back\\slash, <tags> & ampersands.\nSecond line\twith tab.",
		`{"$defs": {"Passenger": {"properties": {"first_name": {"title": "First Name", "type": "string"}, "dob": {"type": "string"}}, "required": ["first_name", "dob"], "type": "object"}}, "properties": {"passengers": {"items": {"$ref": "#/$defs/Passenger"}, "type": "array"}, "nonfree_bags": {"type": "integer", "minimum": 0, "maximum": 10}, "ratio": {"type": "number", "default": 0.5}, "insurance": {"enum": ["yes", "no"], "type": "string"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}}, "required": ["passengers"], "type": "object", "additionalProperties": false}`),
	mustTool("think", "Use the tool to think about something. 日本語の説明 and emoji 🚀.",
		`{"properties": {"thoughts": {"description": "A thought to think about.", "type": "string"}}, "required": ["thoughts"], "type": "object"}`),
	mustTool("transfer_to_human_agents", "", `{"properties": {}, "type": "object"}`),
	json.RawMessage(`{"type": "function", "function": {"name": "dup_keys", "description": "ctl \u0001 and \u001f and \u007f", "parameters": {"b": 1, "a": 2, "b": 3, "neg": -7, "t": true, "f": false, "n": null, "arr": [[], {}, [1, [2, [3]]]]}}}`),
}

func call(id, name, args string) ToolCall {
	return ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: json.RawMessage(args)}}
}

// handRenderCases cover every branch of the template.
func handRenderCases() []renderCase {
	sys := Message{Role: RoleSystem, Content: "<instructions>\nYou are a customer service agent.\n</instructions>\n<policy>\n# Airline policy\n</policy>"}
	greet := Message{Role: RoleAssistant, Content: "Hi! How can I help you today?"}
	u1 := Message{Role: RoleUser, Content: "I want to cancel reservation EHGLP3. My id is mia_li_3668."}
	a1 := Message{Role: RoleAssistant, Content: "", ToolCalls: []ToolCall{call("c1", "get_user_details", `{"user_id": "mia_li_3668"}`)}}
	t1 := Message{Role: RoleTool, ToolCallID: "c1", Content: `{"user_id": "mia_li_3668", "name": {"first_name": "Mia", "last_name": "Li"}, "reservations": ["EHGLP3"]}`}
	a2 := Message{Role: RoleAssistant, Content: "Let me check both.", ToolCalls: []ToolCall{
		call("c2", "get_reservation_details", `{"reservation_id":"EHGLP3"}`),
		call("c3", "get_reservation_details", `{"reservation_id": "X1", "extra": [1, 2.5, -3, "é", null]}`)}}
	t2 := Message{Role: RoleTool, ToolCallID: "c2", Content: "{\"status\": \"ok\"}"}
	t3 := Message{Role: RoleTool, ToolCallID: "c3", Content: "Error: reservation X1 not found"}
	a3 := Message{Role: RoleAssistant, Content: "Your reservation EHGLP3 can be cancelled. Shall I proceed?"}
	u2 := Message{Role: RoleUser, Content: "Yes please. ###STOP###"}
	thinkA := Message{Role: RoleAssistant, ReasoningContent: Ptr("\nThe user wants to cancel.\nCheck policy first.\n"), Content: "\n\nSure, one moment."}
	thinkInline := Message{Role: RoleAssistant, Content: "<think>\nI should look up the user.\n</think>\n\n", ToolCalls: []ToolCall{call("c9", "get_user_details", `{"user_id": "a"}`)}}
	thinkInline2 := Message{Role: RoleAssistant, Content: "prefix<think>one</think>middle</think>\n\nfinal answer"}
	emptyReason := Message{Role: RoleAssistant, ReasoningContent: Ptr(""), Content: "No thinking here."}
	toolRespUser := Message{Role: RoleUser, Content: "<tool_response>\nmanual\n</tool_response>"}
	strArgs := Message{Role: RoleAssistant, Content: "", ToolCalls: []ToolCall{call("s1", "book_flight", `"{\"passengers\": [], \"raw\": \"as sent\"}"`), call("s2", "think", `"not json at all"`)}}

	return []renderCase{
		{Name: "user only", Messages: []Message{{Role: RoleUser, Content: "Hello"}}, AddGenerationPrompt: true},
		{Name: "system user", Messages: []Message{sys, u1}, AddGenerationPrompt: true},
		{Name: "system user no gen", Messages: []Message{sys, u1}},
		{Name: "tools no system", Messages: []Message{u1}, Tools: fixtureTools, AddGenerationPrompt: true},
		{Name: "tools system", Messages: []Message{sys, greet, u1}, Tools: fixtureTools, AddGenerationPrompt: true},
		{Name: "thinking off", Messages: []Message{sys, greet, u1}, Tools: fixtureTools[:1], AddGenerationPrompt: true, EnableThinking: bptr(false)},
		{Name: "thinking on explicit", Messages: []Message{sys, u1}, AddGenerationPrompt: true, EnableThinking: bptr(true)},
		{Name: "full episode", Messages: []Message{sys, greet, u1, a1, t1, a2, t2, t3, a3, u2}, Tools: fixtureTools, AddGenerationPrompt: true},
		{Name: "episode mid tool", Messages: []Message{sys, greet, u1, a1, t1}, Tools: fixtureTools, AddGenerationPrompt: true},
		{Name: "episode last assistant", Messages: []Message{sys, greet, u1, a1, t1, a3}, Tools: fixtureTools},
		{Name: "thinking before last query dropped", Messages: []Message{sys, u1, thinkA, u2}, Tools: fixtureTools[:2], AddGenerationPrompt: true},
		{Name: "thinking after last query kept", Messages: []Message{sys, u1, thinkInline, t1, thinkA}, Tools: fixtureTools[:2]},
		{Name: "thinking after last query gen", Messages: []Message{sys, u1, thinkInline, t1}, Tools: fixtureTools[:2], AddGenerationPrompt: true},
		{Name: "inline think multiple close", Messages: []Message{u1, thinkInline2}},
		{Name: "inline think multiple close not last", Messages: []Message{u1, thinkInline2, t1}, AddGenerationPrompt: true},
		{Name: "empty reasoning last", Messages: []Message{u1, emptyReason}},
		{Name: "empty reasoning not last", Messages: []Message{u1, emptyReason, t2}, AddGenerationPrompt: true},
		{Name: "tool response as user", Messages: []Message{u1, a1, toolRespUser, thinkA}, Tools: fixtureTools[:1]},
		{Name: "system in middle", Messages: []Message{sys, u1, a3, {Role: RoleSystem, Content: "Reminder."}, u2}, AddGenerationPrompt: true},
		{Name: "tool first", Messages: []Message{t1, t2, u1}, AddGenerationPrompt: true},
		{Name: "string arguments", Messages: []Message{u1, strArgs, t2, t3}, Tools: fixtureTools, AddGenerationPrompt: true},
		{Name: "no user at all", Messages: []Message{sys, greet, thinkA}, AddGenerationPrompt: true},
		{Name: "assistant first", Messages: []Message{greet, u1}, AddGenerationPrompt: true, EnableThinking: bptr(false)},
		{Name: "unicode and control", Messages: []Message{{Role: RoleUser, Content: "Ünïcödé 你好 😀 \u0085\ufeff\r\n tab\t end"}, {Role: RoleAssistant, Content: "", ToolCalls: []ToolCall{call("u", "think", `{"thoughts": "é\u0001\n\"q\" \\ <>&\u2028 😀"}`)}}}, Tools: fixtureTools, AddGenerationPrompt: true},
		{Name: "empty content tool call only", Messages: []Message{u1, {Role: RoleAssistant, ToolCalls: []ToolCall{call("e", "transfer_to_human_agents", `{}`)}}}},
	}
}

// randomRenderCases generates conversations of the shapes an episode takes:
// greetings, user turns, tool-call rounds with several results, thinking in
// both encodings, and random template options.
func randomRenderCases(seed uint64, n int) []renderCase {
	r := rand.New(rand.NewPCG(seed, seed+1))
	texts := []string{"Hello.", "I need help with my order #W123.", "Sure — what's your zip code?", "It's 10001.",
		"ok", "Thanks!\n\nBye.", "  leading and trailing  ", "\nnewline first", "last newline\n", "中文内容", "emoji 🎉", ""}
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	var out []renderCase
	for k := range n {
		var msgs []Message
		if r.IntN(3) > 0 {
			msgs = append(msgs, Message{Role: RoleSystem, Content: "System prompt " + pick(texts)})
		}
		if r.IntN(2) == 0 {
			msgs = append(msgs, Message{Role: RoleAssistant, Content: "Hi! How can I help you today?"})
		}
		turns := 1 + r.IntN(6)
		for range turns {
			msgs = append(msgs, Message{Role: RoleUser, Content: pick(texts)})
			rounds := r.IntN(3)
			for range rounds {
				a := Message{Role: RoleAssistant, Content: pick(texts)}
				switch r.IntN(4) {
				case 0:
					a.ReasoningContent = Ptr(pick(texts))
				case 1:
					a.Content = "<think>\n" + pick(texts) + "\n</think>\n\n" + a.Content
				}
				calls := 1 + r.IntN(3)
				for c := range calls {
					a.ToolCalls = append(a.ToolCalls, call(fmt.Sprintf("call_%d", c), "get_user_details",
						fmt.Sprintf(`{"user_id": %q, "n": %d, "flag": %v}`, pick(texts), r.IntN(1000)-500, r.IntN(2) == 0)))
				}
				msgs = append(msgs, a)
				for c := range calls {
					msgs = append(msgs, Message{Role: RoleTool, ToolCallID: fmt.Sprintf("call_%d", c), Content: pick(texts)})
				}
			}
			if r.IntN(3) > 0 {
				a := Message{Role: RoleAssistant, Content: pick(texts)}
				if r.IntN(3) == 0 {
					a.ReasoningContent = Ptr(pick(texts))
				}
				msgs = append(msgs, a)
			}
		}
		c := renderCase{Name: fmt.Sprintf("random %d", k), Messages: msgs, AddGenerationPrompt: r.IntN(4) > 0}
		if r.IntN(3) > 0 {
			c.Tools = fixtureTools[:1+r.IntN(len(fixtureTools))]
		}
		switch r.IntN(3) {
		case 0:
			c.EnableThinking = bptr(false)
		case 1:
			c.EnableThinking = bptr(true)
		}
		out = append(out, c)
	}
	return out
}
