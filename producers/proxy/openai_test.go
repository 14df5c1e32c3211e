package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/inference/llmtest"
)

// n choices are generated from one prompt and each is recorded; a client
// that continues with the second choice continues from its tokens.
func TestNChoices(t *testing.T) {
	h := newHarness(t, llmtest.Sequence(llmtest.Reply{Content: "first"}, llmtest.Reply{Content: "second"}, llmtest.Reply{Content: "next"}))
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	code, out := h.chat(t, "n", map[string]any{"messages": msgs, "n": 2, "seed": 7})
	chs, _ := out["choices"].([]any)
	if code != 200 || len(chs) != 2 {
		t.Fatalf("%d %v", code, out)
	}
	second := chs[1].(map[string]any)
	if second["index"] != float64(1) {
		t.Fatalf("second choice index %v", second["index"])
	}
	msgs = append(msgs, second["message"], map[string]any{"role": "user", "content": "more"})
	if code, out := h.chat(t, "n", map[string]any{"messages": msgs}); code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	h.finish(t, "n", 1)
	tr := trajectories(t, h.kc, 1, 10*time.Second)[0]
	if len(tr.Calls) != 3 {
		t.Fatalf("%d calls recorded, want 3 (2 choices + 1)", len(tr.Calls))
	}
	picked := 0
	if text, _ := h.tok.Decode(tr.Calls[1].CompletionTokens); strings.HasPrefix(text, chs[1].(map[string]any)["message"].(map[string]any)["content"].(string)) {
		picked = 1
	}
	c := tr.Calls[2]
	want := tr.PromptLen(picked) + len(tr.Calls[picked].CompletionTokens)
	if c.PromptRef != picked || c.PromptShared != want {
		t.Fatalf("continuation refers to call %d sharing %d tokens, want call %d sharing %d", c.PromptRef, c.PromptShared, picked, want)
	}
	if got := tr.Messages[1].Content; got != second["message"].(map[string]any)["content"] || tr.Messages[1].CallIndex != picked {
		t.Fatalf("conversation holds %q (call %d)", got, tr.Messages[1].CallIndex)
	}
}

// Stop strings end the answer before the string; the recorded completion
// ends with the token that completed it.
func TestStopStrings(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "Hello world. Bye."}))
	code, out := h.chat(t, "stop", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "stop": []string{"world", "Bye"}})
	msg, finish := firstChoice(t, out)
	if code != 200 || finish != "stop" || msg["content"] != "Hello" {
		t.Fatalf("%d %s %q", code, finish, msg["content"])
	}
	h.finish(t, "stop", 1)
	tr := trajectories(t, h.kc, 1, 10*time.Second)[0]
	text, _ := h.tok.Decode(tr.Calls[0].CompletionTokens)
	if text != "Hello world" || tr.Calls[0].FinishReason != "stop" {
		t.Fatalf("recorded completion %q (%s)", text, tr.Calls[0].FinishReason)
	}
}

// The streamed chunks have OpenAI's shapes.
func TestStreamChunks(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Reasoning: "think", Content: "Looking that up for you now, one moment.",
		ToolCalls: []llmtest.ToolCall{{Name: "get_user_details", Arguments: map[string]any{"user_id": airlineUser}}, {Name: "list_all_airports"}}}))
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": true, "stream_options": map[string]any{"include_usage": true},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer k;session=s")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, ct)
	}
	var chunks []map[string]any
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || done {
			t.Fatalf("unexpected line %q", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		if c["object"] != "chat.completion.chunk" || c["id"] != chunks0ID(chunks, c) {
			t.Fatalf("chunk %v", c)
		}
		chunks = append(chunks, c)
	}
	if !done || len(chunks) < 6 {
		t.Fatalf("%d chunks, done %v", len(chunks), done)
	}
	delta := func(i int) map[string]any {
		return chunks[i]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
	}
	if d := delta(0); d["role"] != "assistant" || d["content"] != "" {
		t.Fatalf("first delta %v", d)
	}
	var content, args [2]strings.Builder
	var names [2]string
	var ids [2]string
	var finish any
	for i := 1; i < len(chunks)-1; i++ {
		ch := chunks[i]["choices"].([]any)[0].(map[string]any)
		d := ch["delta"].(map[string]any)
		if s, ok := d["content"].(string); ok {
			content[0].WriteString(s)
		}
		if tcs, ok := d["tool_calls"].([]any); ok {
			tc := tcs[0].(map[string]any)
			k := int(tc["index"].(float64))
			if id, ok := tc["id"].(string); ok {
				if tc["type"] != "function" || tc["function"].(map[string]any)["arguments"] != "" {
					t.Fatalf("tool call head %v", tc)
				}
				ids[k], names[k] = id, tc["function"].(map[string]any)["name"].(string)
				continue
			}
			args[k].WriteString(tc["function"].(map[string]any)["arguments"].(string))
		}
		if f := ch["finish_reason"]; f != nil {
			finish = f
		}
		if chunks[i]["usage"] != nil {
			t.Fatalf("usage before the last chunk: %v", chunks[i])
		}
	}
	last := chunks[len(chunks)-1]
	if len(last["choices"].([]any)) != 0 || last["usage"] == nil {
		t.Fatalf("last chunk %v: want empty choices and the usage", last)
	}
	if content[0].String() != "Looking that up for you now, one moment." || finish != "tool_calls" ||
		names != [2]string{"get_user_details", "list_all_airports"} || ids[0] == "" || ids[0] == ids[1] ||
		args[0].String() != `{"user_id": "`+airlineUser+`"}` || args[1].String() != "{}" {
		t.Fatalf("reassembled: content %q finish %v names %v ids %v args %q %q", content[0].String(), finish, names, ids, args[0].String(), args[1].String())
	}
}

func chunks0ID(chunks []map[string]any, c map[string]any) any {
	if len(chunks) == 0 {
		return c["id"]
	}
	return chunks[0]["id"]
}

// A client that goes back to an earlier state (a branch) continues from it
// token-exactly, and the later state it left keeps its tokens (the states
// share one backing array until they diverge).
func TestBranching(t *testing.T) {
	h := newHarness(t, llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		return llmtest.Reply{Content: "answer to " + c.LastMessage().Content}, nil
	}))
	u := func(s string) any { return map[string]any{"role": "user", "content": s} }
	_, out := h.chat(t, "br", map[string]any{"messages": []any{u("one")}})
	a1, _ := firstChoice(t, out)
	_, out = h.chat(t, "br", map[string]any{"messages": []any{u("one"), a1, u("two")}})
	a2, _ := firstChoice(t, out)
	if code, out := h.chat(t, "br", map[string]any{"messages": []any{u("one"), a1, u("three")}}); code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	if code, out := h.chat(t, "br", map[string]any{"messages": []any{u("one"), a1, u("two"), a2, u("four")}}); code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	h.finish(t, "br", 1)
	tr := trajectories(t, h.kc, 1, 10*time.Second)[0]
	sent := h.got.all()
	checkTokenExact(t, h.tok, tr, sent, map[int]bool{2: true, 3: true})
	imEnd, _ := h.tok.AddedTokenID("<|im_end|>")
	for _, c := range []struct{ call, from int }{{2, 0}, {3, 1}} {
		base := append(slices.Clone(sent[c.from]), tr.Calls[c.from].CompletionTokens...)
		if base[len(base)-1] != imEnd || !slices.Equal(sent[c.call][:len(base)], base) {
			t.Fatalf("call %d does not continue from call %d's answer", c.call, c.from)
		}
	}
	if tr.Tags["template_drift"] != "" {
		t.Fatalf("a branch from a kept state is not drift: %v", tr.Tags)
	}
}
