package proxy_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/producers/proxy"
)

// The failure modes AReaL's proxy users reported (AReaL #736), each checked
// here against the scripted SGLang server.

// chatMessage decodes the first choice of a chat answer.
func firstChoice(tb testing.TB, out map[string]any) (map[string]any, string) {
	tb.Helper()
	chs, ok := out["choices"].([]any)
	if !ok || len(chs) == 0 {
		tb.Fatalf("no choices: %v", out)
	}
	ch := chs[0].(map[string]any)
	return ch["message"].(map[string]any), ch["finish_reason"].(string)
}

// Tool-call concatenation: tools and tool calls go into the prompt exactly
// as Qwen3's template renders them (tools in the system turn, the
// assistant's calls, results grouped as <tool_response> blocks, "\n"
// between <|im_end|> and <|im_start|>); and tool calls the model writes
// back to back, without a separator, come back as separate calls.
func TestAReaL736ToolCallConcatenation(t *testing.T) {
	e := airlineEnv(t)
	tools := toolSchemas(e)
	script := llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		if c.LastMessage().Role == chattemplate.RoleTool {
			return llmtest.Reply{Content: "Both found."}, nil
		}
		return llmtest.Reply{Raw: "<think>\nTwo lookups.\n</think>\n\n" +
			`<tool_call>{"name": "get_reservation_details", "arguments": {"reservation_id": "NO6JO3"}}</tool_call>` +
			`<tool_call>{"name": "get_reservation_details", "arguments": {"reservation_id": "AIXC49"}}</tool_call>`}, nil
	})
	h := newHarness(t, script)
	msgs := []any{map[string]any{"role": "system", "content": "You are an airline agent."}, map[string]any{"role": "user", "content": "Check NO6JO3 and AIXC49."}}
	code, out := h.chat(t, "concat", map[string]any{"messages": msgs, "tools": tools})
	msg, finish := firstChoice(t, out)
	tcs, _ := msg["tool_calls"].([]any)
	if code != 200 || finish != "tool_calls" || len(tcs) != 2 {
		t.Fatalf("%d %s: %d tool calls, want 2: %v", code, finish, len(tcs), jsonString(msg))
	}
	cm := []chattemplate.Message{{Role: "system", Content: "You are an airline agent."}, {Role: "user", Content: "Check NO6JO3 and AIXC49."},
		{Role: "assistant", ReasoningContent: chattemplate.Ptr("Two lookups.")}}
	msgs = append(msgs, msg)
	for _, tc := range tcs {
		f := tc.(map[string]any)["function"].(map[string]any)
		res, _ := e.Call("assistant", f["name"].(string), f["arguments"].(string))
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": tc.(map[string]any)["id"], "content": res})
		cm[2].ToolCalls = append(cm[2].ToolCalls, chattemplate.ToolCall{Function: chattemplate.FunctionCall{Name: f["name"].(string), Arguments: json.RawMessage(f["arguments"].(string))}})
		cm = append(cm, chattemplate.Message{Role: "tool", Content: res})
	}
	if code, out := h.chat(t, "concat", map[string]any{"messages": msgs, "tools": tools}); code != 200 {
		t.Fatalf("second call: %d %v", code, out)
	}
	// The second prompt holds the completion as generated (the calls back
	// to back), then the results as the template renders them.
	sent := h.got.all()
	text, _ := h.tok.Decode(sent[1])
	if !strings.Contains(text, "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n") || !strings.HasSuffix(text, "</tool_response><|im_end|>\n<|im_start|>assistant\n") {
		t.Fatalf("second prompt is not the template's rendering:\n%s", text)
	}
	// Where the model wrote the template's own format, the incremental
	// prompt equals the template's rendering of the whole conversation.
	h2 := newHarness(t, airlineScript())
	first := []any{map[string]any{"role": "system", "content": "You are an airline agent."}, map[string]any{"role": "user", "content": "Who am I? " + airlineUser}}
	_, out = h2.chat(t, "tmpl", map[string]any{"messages": first, "tools": tools})
	msg, _ = firstChoice(t, out)
	tc := msg["tool_calls"].([]any)[0].(map[string]any)
	res, _ := e.Call("assistant", "get_user_details", tc["function"].(map[string]any)["arguments"].(string))
	second := append(first, msg, map[string]any{"role": "tool", "tool_call_id": tc["id"], "content": res})
	if code, out := h2.chat(t, "tmpl", map[string]any{"messages": second, "tools": tools}); code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	conv := []chattemplate.Message{{Role: "system", Content: "You are an airline agent."}, {Role: "user", Content: "Who am I? " + airlineUser},
		{Role: "assistant", ReasoningContent: chattemplate.Ptr(msg["reasoning_content"].(string)), ToolCalls: []chattemplate.ToolCall{{Function: chattemplate.FunctionCall{
			Name: "get_user_details", Arguments: json.RawMessage(tc["function"].(map[string]any)["arguments"].(string))}}}},
		{Role: "tool", Content: res}}
	want, err := chattemplate.Render(conv, chattemplate.Options{Tools: tools, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := h2.got.all()[1]; !slices.Equal(got, h2.tok.Encode(want)) {
		text, _ := h2.tok.Decode(got)
		t.Fatalf("incremental prompt differs from the template's rendering:\n%q\nvs\n%q", text, want)
	}
}

// max_tokens overflow: whatever the client asks for, a call's prompt plus
// completion stays within engine_max_tokens (so the sequence the trainer
// packs does too), and a conversation that outgrows it is refused with
// context_length_exceeded instead of being generated and trained on.
func TestAReaL736MaxTokensOverflow(t *testing.T) {
	const engineMax = 60
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: strings.Repeat("words ", 200)}), func(c *proxy.Config) { c.EngineMaxTokens = engineMax })
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	code, out := h.chat(t, "overflow", map[string]any{"messages": msgs, "max_tokens": 1000})
	msg, finish := firstChoice(t, out)
	if code != 200 || finish != "length" {
		t.Fatalf("%d %s", code, finish)
	}
	sent := h.got.all()
	if h.got.max[0] != engineMax-len(sent[0]) {
		t.Fatalf("budget %d sent for a %d-token prompt, want engine_max_tokens − prompt = %d", h.got.max[0], len(sent[0]), engineMax-len(sent[0]))
	}
	if u := out["usage"].(map[string]any); u["total_tokens"] != float64(engineMax) {
		t.Fatalf("usage %v, want %d tokens in all", u, engineMax)
	}
	msgs = append(msgs, msg, map[string]any{"role": "user", "content": "go on"})
	code, out = h.chat(t, "overflow", map[string]any{"messages": msgs})
	if e := errorOf(t, out); code != 400 || e["code"] != "context_length_exceeded" {
		t.Fatalf("over the engine limit: %d %v", code, e)
	}
	h.finish(t, "overflow", 0)
	tr := trajectories(t, h.kc, 1, 10*time.Second)[0]
	for i := range tr.Calls {
		if n := tr.PromptLen(i) + len(tr.Calls[i].CompletionTokens); n > engineMax {
			t.Fatalf("call %d holds %d tokens, over engine_max_tokens %d", i, n, engineMax)
		}
	}
}

// The reasoning parser runs before the tool-call parser: a tool call the
// model writes inside <think> is reasoning, not a call.
func TestAReaL736ReasoningParser(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Reasoning: fakeToolCallInThinking, Content: "Nothing to do."}))
	code, out := h.chat(t, "think", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}},
		"tools": toolSchemas(airlineEnv(t))})
	msg, finish := firstChoice(t, out)
	if code != 200 || finish != "stop" || msg["tool_calls"] != nil || msg["content"] != "Nothing to do." || msg["reasoning_content"] != fakeToolCallInThinking {
		t.Fatalf("%d %s %s", code, finish, jsonString(msg))
	}
}

// EOS handling: the stop token is recorded as generated but never returned
// as text, and a completion ended by <|endoftext|> instead of <|im_end|> is
// closed with <|im_end|> before the next turn (as the template closes it).
func TestAReaL736EOS(t *testing.T) {
	h := newHarness(t, llmtest.Sequence(llmtest.Reply{Raw: "Hello<|endoftext|>"}, llmtest.Reply{Content: "Again."}, llmtest.Reply{Content: "Retried."}))
	msgs := []any{map[string]any{"role": "user", "content": "hi"}}
	_, out := h.chat(t, "eos", map[string]any{"messages": msgs})
	msg, finish := firstChoice(t, out)
	if finish != "stop" || msg["content"] != "Hello" {
		t.Fatalf("%s %q: want stop and the text without the stop token", finish, msg["content"])
	}
	msgs = append(msgs, msg, map[string]any{"role": "user", "content": "again"})
	if code, out := h.chat(t, "eos", map[string]any{"messages": msgs}); code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	// A retried call (same messages) is sent the same prompt again.
	if code, out := h.chat(t, "eos", map[string]any{"messages": msgs}); code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	if sent := h.got.all(); !slices.Equal(sent[2], sent[1]) {
		t.Fatal("a retried call was sent a different prompt")
	}
	h.finish(t, "eos", 1)
	tr := trajectories(t, h.kc, 1, 10*time.Second)[0]
	checkTokenExact(t, h.tok, tr, h.got.all(), map[int]bool{2: true})
	eot, _ := h.tok.AddedTokenID("<|endoftext|>")
	imEnd, _ := h.tok.AddedTokenID(chattemplate.IMEnd)
	c0 := tr.Calls[0].CompletionTokens
	if c0[len(c0)-1] != eot {
		t.Fatalf("completion recorded without its <|endoftext|>: %v", c0)
	}
	p1 := h.got.all()[1]
	if n := len(h.got.all()[0]) + len(c0); p1[n] != imEnd {
		t.Fatalf("next prompt does not close the turn with <|im_end|> after <|endoftext|>")
	}
}
