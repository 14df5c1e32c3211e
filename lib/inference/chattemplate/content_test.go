package chattemplate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestContentText(t *testing.T) {
	for _, tc := range []struct {
		raw, want, err string
	}{
		{``, "", ""},
		{`null`, "", ""},
		{`"hello"`, "hello", ""},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "ab", ""},
		{`[]`, "", ""},
		{`[{"type":"image_url","image_url":{"url":"x"}}]`, "", `content part 0 of type "image_url" is not supported`},
		{`[{"type":"text"}]`, "", `content part 0 of type "text" is not supported`},
		{`42`, "", "content must be a string, null or an array of text parts"},
		{`"unterminated`, "", "content:"},
	} {
		got, err := ContentText(json.RawMessage(tc.raw))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.raw, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one containing %q", tc.raw, err, tc.err)
		case got != tc.want:
			t.Errorf("%s: %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// JoinContentText joins text parts with the engine's separator (SGLang " ",
// vLLM "\n"); a string content is returned as it is.
func TestJoinContentText(t *testing.T) {
	parts := json.RawMessage(`[{"type":"text","text":"reservations?"},{"type":"text","text":"I am"},{"type":"text","text":""}]`)
	for _, sep := range []string{" ", "\n", ""} {
		got, err := JoinContentText(parts, sep)
		if want := "reservations?" + sep + "I am" + sep; err != nil || got != want {
			t.Errorf("sep %q: %q %v, want %q", sep, got, err, want)
		}
	}
	if got, err := JoinContentText(json.RawMessage(`"a b"`), "\n"); err != nil || got != "a b" {
		t.Errorf("string content: %q %v", got, err)
	}
}

func TestFromWire(t *testing.T) {
	var wire []WireMessage
	if err := json.Unmarshal([]byte(`[
		{"role": "system", "content": "S"},
		{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
		{"role": "assistant", "content": null, "reasoning_content": "r",
		 "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
		                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {"y": 2}}}]},
		{"role": "tool", "tool_call_id": "c1", "content": "ok"}]`), &wire); err != nil {
		t.Fatal(err)
	}
	msgs, err := FromWire(wire)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[1].Content != "ab" || msgs[2].Content != "" || *msgs[2].ReasoningContent != "r" || msgs[3].ToolCallID != "c1" {
		t.Fatalf("messages %+v", msgs)
	}
	tc := msgs[2].ToolCalls
	if len(tc) != 2 || tc[0].Function.Name != "f" || string(tc[0].Function.Arguments) != `"{\"x\": 1}"` || string(tc[1].Function.Arguments) != `{"y": 2}` {
		t.Fatalf("tool calls %+v", tc)
	}
	bad := append(wire[:1:1], WireMessage{Role: "user", Content: json.RawMessage(`[{"type": "image_url"}]`)})
	if _, err := FromWire(bad); err == nil || !strings.Contains(err.Error(), "messages[1]: content part 0") {
		t.Fatalf("image part: %v", err)
	}
}
