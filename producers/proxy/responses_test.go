package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"tau2rl/lib/inference/chattemplate"
)

// inputMessages: each Responses input shape becomes the chat messages a chat
// client would send for the same conversation; the items of one generation
// (reasoning, message, function calls) make one assistant message.
func TestResponsesInputMessages(t *testing.T) {
	cases := []struct {
		name  string
		input string
		want  string // the chat messages as JSON
	}{
		{"string", `"hi"`, `[{"role":"user","content":"hi"}]`},
		{"easy messages", `[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]`,
			`[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`},
		{"one generation's output sent back", `[{"type":"message","role":"user","content":"q"},
			{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},
			{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me look.","annotations":[]}]},
			{"type":"function_call","id":"fc_1","call_id":"call_a","name":"f","arguments":"{\"x\": 1}","status":"completed"},
			{"type":"function_call","id":"fc_2","call_id":"call_b","name":"g","arguments":"{}"},
			{"type":"function_call_output","call_id":"call_a","output":"ra"},
			{"type":"function_call_output","call_id":"call_b","output":[{"type":"input_text","text":"rb"}]}]`,
			`[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"text","text":"Let me look."}],"reasoning_content":"think","tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}},{"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]},{"role":"tool","content":"ra","tool_call_id":"call_a"},{"role":"tool","content":[{"type":"text","text":"rb"}],"tool_call_id":"call_b"}]`},
		{"calls without a message", `[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"}]`,
			`[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"r","tool_call_id":"c"}]`},
		{"two assistant messages are two turns", `[{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}]`,
			`[{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}]`},
		{"a message after calls starts a turn", `[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"role":"assistant","content":"b"}]`,
			`[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"assistant","content":"b"}]`},
		{"reasoning from its summary", `[{"type":"reasoning","summary":[{"type":"summary_text","text":"a"},{"type":"summary_text","text":"b"}]},{"role":"assistant","content":"x"}]`,
			`[{"role":"assistant","content":"x","reasoning_content":"a\n\nb"}]`},
		{"refusal part", `[{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]`,
			`[{"role":"assistant","content":[{"type":"text","text":"no"}]}]`},
		{"user message closes the turn", `[{"type":"function_call","call_id":"c","name":"f"},{"role":"user","content":"u"},{"type":"function_call","call_id":"d","name":"f"}]`,
			`[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":""}}]},{"role":"user","content":"u"},{"role":"assistant","content":null,"tool_calls":[{"id":"d","type":"function","function":{"name":"f","arguments":""}}]}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := inputMessages(json.RawMessage(tc.input))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got)
			var a, w any
			_ = json.Unmarshal(b, &a)
			if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(a, w) {
				t.Fatalf("got  %s\nwant %s", b, tc.want)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// Bad input is an OpenAI 400 naming the parameter.
func TestResponsesBadInput(t *testing.T) {
	cases := []struct{ body, param string }{
		{`{"input":42}`, "input"},
		{`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0]"},
		{`{"input":[{"type":"web_search_call","id":"w"}]}`, "input[0].type"},
		{`{"input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type"},
		{`{"input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{`{"input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id"},
		{`{"input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`, "input[0].name"},
		{`{"input":[{"type":"function_call_output","output":"r"}]}`, "input[0].call_id"},
		{`{"input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "input[0].content[0]"},
		{`{"input":[7]}`, "input[0]"},
		{`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":{"a":1}}]}`, "input[0].arguments"},
		{`{"input":"x","tools":{}}`, "tools"},
		{`{"input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"input":"x","tools":[{"type":"function","parameters":{}}]}`, "tools[0].name"},
		{`{"input":"x","tools":["f"]}`, "tools[0]"},
		{`{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, "tool_choice"},
		{`{"input":"x","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}}`, "tool_choice"},
		{`{"input":"x","max_output_tokens":0}`, "max_output_tokens"},
		{`{"input":"x","background":true}`, "background"},
		{`{"input":"x","conversation":"conv_1"}`, "conversation"},
		{`{"input":"x","prompt":{"id":"pmpt_1"}}`, "prompt"},
		{`{"input":"x"`, ""},
		{`[]`, ""},
	}
	for _, tc := range cases {
		_, err := parseResponses([]byte(tc.body))
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != errInvalidRequest || ae.Param != tc.param {
			t.Errorf("%s: %v (param %q), want a 400 invalid_request_error with param %q", tc.body, err, paramOf(ae), tc.param)
		}
	}
}

func paramOf(ae *APIError) string {
	if ae == nil {
		return ""
	}
	return ae.Param
}

// chatTools keeps the client's function fields in the client's order and
// drops only "type", so the tool renders as the same function sent to chat.
func TestResponsesChatTools(t *testing.T) {
	got, err := chatTools([]json.RawMessage{json.RawMessage(`{"name":"f","type":"function","strict":false,"parameters":{"type":"object","properties":{"b":{},"a":{}}},"description":"d"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"function","function":{"name":"f","strict":false,"parameters":{"type":"object","properties":{"b":{},"a":{}}},"description":"d"}}`
	if len(got) != 1 || string(got[0]) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// A Responses request and the chat request a chat client sends for the same
// conversation render the same prompt (the template's input, tools
// included), in every shape the Responses input takes.
func TestResponsesRenderAsChat(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"get_user_details","description":"Get the user.","parameters":{"type":"object","properties":{"user_id":{"type":"string"}},"required":["user_id"]}}}]`
	const rtools = `"tools":[{"type":"function","name":"get_user_details","description":"Get the user.","parameters":{"type":"object","properties":{"user_id":{"type":"string"}},"required":["user_id"]}}]`
	cases := []struct{ name, responses, chat string }{
		{"string input with instructions",
			`{"instructions":"You are an agent.","input":"Hello",` + rtools + `}`,
			`{"messages":[{"role":"system","content":"You are an agent."},{"role":"user","content":"Hello"}],` + tools + `}`},
		{"no instructions, developer item",
			`{"input":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"input_text","text":"Hi"}]}]}`,
			`{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`},
		{"a tool round sent back as items",
			`{"instructions":"S","input":[{"role":"user","content":"q"},
				{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"Look it up."}]},
				{"type":"function_call","call_id":"call_1","name":"get_user_details","arguments":"{\"user_id\": \"u1\"}"},
				{"type":"function_call_output","call_id":"call_1","output":"{\"name\": \"Mia\"}"},
				{"type":"message","role":"assistant","content":[{"type":"output_text","text":"You are Mia."}]},
				{"role":"user","content":"thanks"}],` + rtools + `}`,
			`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"q"},
				{"role":"assistant","content":null,"reasoning_content":"Look it up.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_user_details","arguments":"{\"user_id\": \"u1\"}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"{\"name\": \"Mia\"}"},
				{"role":"assistant","content":"You are Mia."},{"role":"user","content":"thanks"}],` + tools + `}`},
		{"thinking off, tool_choice, sampling",
			`{"input":"x","chat_template_kwargs":{"enable_thinking":false},"tool_choice":{"type":"function","name":"get_user_details"},"temperature":0.5,"max_output_tokens":9,` + rtools + `}`,
			`{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false},"tool_choice":{"type":"function","function":{"name":"get_user_details"}},"temperature":0.5,"max_completion_tokens":9,` + tools + `}`},
	}
	cfg := DefaultConfig()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := parseResponses([]byte(tc.responses))
			if err != nil {
				t.Fatal(err)
			}
			rcall, err := checkCall(&call{req: rc.chatRequest(nil)}, cfg, &internCache{})
			if err != nil {
				t.Fatal(err)
			}
			ccall, err := readChat(httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader([]byte(tc.chat))), cfg, &internCache{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []*call{rcall, ccall} {
				c.opts.AddGenerationPrompt = true
			}
			got, err := chattemplate.Render(rcall.msgs, rcall.opts)
			if err != nil {
				t.Fatal(err)
			}
			want, err := chattemplate.Render(ccall.msgs, ccall.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("Responses render:\n%s\nchat render:\n%s", got, want)
			}
			temp := func(c *call) float64 {
				if c.req.Temperature == nil {
					return -1
				}
				return *c.req.Temperature
			}
			if rcall.optsKey.thinking != ccall.optsKey.thinking || rcall.maxToks != ccall.maxToks || temp(rcall) != temp(ccall) {
				t.Fatalf("options differ: thinking %v/%v, budget %d/%d, temperature %v/%v", rcall.optsKey.thinking, ccall.optsKey.thinking,
					rcall.maxToks, ccall.maxToks, temp(rcall), temp(ccall))
			}
			if len(rcall.keys) != len(ccall.keys) {
				t.Fatalf("%d messages, chat %d", len(rcall.keys), len(ccall.keys))
			}
			for i := range rcall.keys {
				if rcall.keys[i] != ccall.keys[i] {
					t.Fatalf("message %d matches differently", i)
				}
			}
		})
	}
}

// A session keeps its last storedResponses responses, and successive
// conversations share their text instead of each holding a copy.
func TestResponseStore(t *testing.T) {
	var rs responseStore
	conv := func(n int) []chattemplate.Message {
		var out []chattemplate.Message
		for i := range n {
			// Fresh strings, as each request decodes its own.
			out = append(out, chattemplate.Message{Role: chattemplate.RoleUser, Content: strings.Repeat("x", 100) + strconv.Itoa(i)})
		}
		return out
	}
	for i := range storedResponses + 3 {
		rs.put("resp_"+strconv.Itoa(i), conv(i+1))
	}
	if _, ok := rs.get("resp_2"); ok {
		t.Fatal("resp_2 kept beyond the window")
	}
	a, okA := rs.get("resp_3")
	b, okB := rs.get("resp_" + strconv.Itoa(storedResponses+2))
	if !okA || !okB || len(rs.ids) != storedResponses || len(rs.conv) != storedResponses {
		t.Fatalf("window: %v %v, %d ids, %d kept", okA, okB, len(rs.ids), len(rs.conv))
	}
	for i := range a {
		if a[i].Content != b[i].Content || unsafe.StringData(a[i].Content) != unsafe.StringData(b[i].Content) {
			t.Fatalf("message %d: stored conversations do not share their text", i)
		}
	}
}

// FuzzParseResponses: any request body is either a Responses call whose
// chat form the template renders, or an OpenAI error with a 4xx status;
// never a panic.
func FuzzParseResponses(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hi"}`,
		`{"instructions":"s","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]}],"tools":[{"type":"function","name":"f","parameters":{}}],"tool_choice":"auto","max_output_tokens":5,"stream":true}`,
		`{"input":[{"type":"reasoning","summary":[{"type":"summary_text","text":"t"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c","output":"r"}]}`,
		`{"input":"x","previous_response_id":"resp_1","store":false,"temperature":0.2,"top_p":0.9}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"nope"}]}`,
		`{"input":[]}`, `[]`, `{"input":[{"role":"tool"}]}`, `{"tools":[{"type":"function","name":"f","name":"g"}]}`,
	} {
		f.Add([]byte(s))
	}
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, body []byte) {
		is4xx := func(err error) {
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500 || ae.Type == "" {
				t.Fatalf("error %v is not a 4xx OpenAI error", err)
			}
		}
		rc, err := parseResponses(body)
		if err != nil {
			is4xx(err)
			return
		}
		if len(rc.items) == 0 {
			return
		}
		c, err := checkCall(&call{req: rc.chatRequest(nil)}, cfg, &internCache{})
		if err != nil {
			is4xx(responsesParam(err))
			return
		}
		if len(c.msgs) != len(c.keys) || c.n != 1 {
			t.Fatalf("accepted call out of bounds: n %d, %d messages", c.n, len(c.msgs))
		}
		_, _ = chattemplate.Render(c.msgs, c.opts)
	})
}
