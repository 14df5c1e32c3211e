package chattemplate

import (
	"errors"
	"slices"
	"strings"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"testing"

	"tau2rl/lib/inference/tokenizer"
)

// assistantBody is what a model writes for m when it writes exactly what the
// template renders (as the last assistant turn), plus <|im_end|>.
func assistantBody(t *testing.T, tk *tokenizer.Tokenizer, m Message, opts Options) []int32 {
	t.Helper()
	text, err := Render([]Message{{Role: RoleUser, Content: "q"}, m}, Options{Tools: opts.Tools})
	if err != nil {
		t.Fatal(err)
	}
	body := text[strings.LastIndex(text, "<|im_start|>assistant\n")+len("<|im_start|>assistant\n"):]
	if opts.thinkingOff() {
		body = strings.TrimPrefix(body, EmptyThink)
	}
	return tk.Encode(body) // ends with <|im_end|>\n; drop the "\n"
}

func trimNewline(ids []int32) []int32 { return ids[:len(ids)-1] }

// TestIncrementalEqualsTemplate: within one user query (tool rounds with
// thinking) and with a model that writes exactly what the template renders,
// the append-only history equals the template's full rendering at every
// call, token for token.
func TestIncrementalEqualsTemplate(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	full := handRenderCases()[7].Messages // sys, greet, u1, a1, t1, a2, t2, t3, a3, u2
	a1, a2 := full[3], full[5]
	a1.ReasoningContent = Ptr("I need the user's details.")
	a2.ReasoningContent = Ptr("Two reservations to check.\nBoth at once.")
	msgs := []Message{full[0], full[1], full[2], a1, full[4], a2, full[6], full[7]}
	opts := Options{Tools: fixtureTools}
	hist, err := New(ModeIncremental, tk, msgs[:3], opts)
	if err != nil {
		t.Fatal(err)
	}
	check := func(n int) {
		t.Helper()
		text, err := Render(msgs[:n], Options{Tools: fixtureTools, AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		if want := tk.Encode(text); !slices.Equal(hist.Prompt(), want) {
			got, _ := tk.Decode(hist.Prompt())
			t.Fatalf("prompt after %d messages differs:\n got %q\nwant %q", n, got, text)
		}
	}
	check(3)
	if _, err := hist.AddCompletion(trimNewline(assistantBody(t, tk, a1, opts))); err != nil {
		t.Fatal(err)
	}
	if err := hist.AddMessages(msgs[4]); err != nil {
		t.Fatal(err)
	}
	check(5)
	c, err := hist.AddCompletion(trimNewline(assistantBody(t, tk, a2, opts)))
	if err != nil || !c.Valid() || len(c.ToolCalls) != 2 || c.Content != "Let me check both." || c.Reasoning != *a2.ReasoningContent {
		t.Fatalf("completion: %+v, %v", c, err)
	}
	if err := hist.AddMessages(msgs[6], msgs[7]); err != nil {
		t.Fatal(err)
	}
	check(8)
}

// TestIncrementalThinkingOff: with enable_thinking=false every generation
// prompt carries an empty think block, which the policy saw and the
// incremental history keeps; the template drops it from earlier turns.
func TestIncrementalThinkingOff(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	full := handRenderCases()[7].Messages
	opts := Options{Tools: fixtureTools, EnableThinking: bptr(false)}
	h, err := New(ModeIncremental, tk, full[:3], opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.AddCompletion(trimNewline(assistantBody(t, tk, full[3], opts))); err != nil {
		t.Fatal(err)
	}
	if err := h.AddMessages(full[4]); err != nil {
		t.Fatal(err)
	}
	text, _ := tk.Decode(h.Prompt())
	if n := strings.Count(text, EmptyThink); n != 2 {
		t.Errorf("incremental prompt has %d empty think blocks, want 2", n)
	}
	rendered, err := Render(full[:5], Options{Tools: fixtureTools, EnableThinking: bptr(false), AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(rendered, EmptyThink); n != 1 {
		t.Errorf("template has %d empty think blocks, want 1", n)
	}
}

// TestIncrementalKeepsThinking: earlier thinking stays in the incremental
// history, while Rerender (like Qwen3's template) drops it after a new user
// query.
func TestIncrementalKeepsThinking(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	sys := Message{Role: RoleSystem, Content: "You are an agent."}
	u1 := Message{Role: RoleUser, Content: "Hi"}
	u2 := Message{Role: RoleUser, Content: "Cancel it."}
	gen := tk.Encode("<think>\nThe user greets me.\n</think>\n\nHello! How can I help?<|im_end|>")

	inc, err := New(ModeIncremental, tk, []Message{sys, u1}, Options{Tools: fixtureTools[:1]})
	if err != nil {
		t.Fatal(err)
	}
	re, err := New(ModeRerender, tk, []Message{sys, u1}, Options{Tools: fixtureTools[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inc.Prompt(), re.Prompt()) {
		t.Fatal("first prompts differ between modes")
	}
	first := inc.Prompt()
	for _, h := range []History{inc, re} {
		c, err := h.AddCompletion(gen)
		if err != nil || c.Reasoning != "The user greets me." || c.Content != "Hello! How can I help?" {
			t.Fatalf("completion %+v %v", c, err)
		}
		if err := h.AddMessages(u2); err != nil {
			t.Fatal(err)
		}
	}
	incText, _ := tk.Decode(inc.Prompt())
	reText, _ := tk.Decode(re.Prompt())
	if !strings.Contains(incText, "The user greets me.") {
		t.Errorf("incremental history lost the thinking: %q", incText)
	}
	if strings.Contains(reText, "The user greets me.") {
		t.Errorf("rerender kept thinking before the last query: %q", reText)
	}
	// Incremental: prompt = first prompt ‖ completion ‖ delta.
	if !slices.Equal(inc.Prompt()[:len(first)+len(gen)], append(slices.Clone(first), gen...)) {
		t.Error("incremental prompt is not an extension of prompt ‖ completion")
	}
	// Rerender equals the template on the parsed messages.
	want, err := Render(re.Messages(), Options{Tools: fixtureTools[:1], AddGenerationPrompt: true})
	if err != nil || reText != want {
		t.Errorf("rerender prompt:\n got %q\nwant %q (%v)", reText, want, err)
	}
	if n := len(inc.Messages()); n != 4 {
		t.Errorf("Messages: %d, want 4", n)
	}
}

func TestIncrementalClosesTruncatedTurn(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	h, err := New(ModeIncremental, tk, []Message{{Role: RoleUser, Content: "Hi"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p0 := len(h.Prompt())
	cut := tk.Encode("<think>\nA very long thought that was cut")
	c, err := h.AddCompletion(cut)
	if err != nil {
		t.Fatal(err)
	}
	if c.Valid() {
		t.Error("truncated thinking should be an invalid format")
	}
	if err := h.AddMessages(Message{Role: RoleUser, Content: "Hello?"}); err != nil {
		t.Fatal(err)
	}
	p := h.Prompt()
	imEnd, _ := tk.AddedTokenID(IMEnd)
	if p[p0+len(cut)] != imEnd {
		t.Errorf("no <|im_end|> after a truncated completion: %v", p[p0:p0+len(cut)+2])
	}
	text, _ := tk.Decode(p[p0:])
	if want := "<think>\nA very long thought that was cut<|im_end|>\n<|im_start|>user\nHello?<|im_end|>\n<|im_start|>assistant\n"; text != want {
		t.Errorf("tail %q, want %q", text, want)
	}
}

func TestHistoryOrderAndErrors(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	for _, mode := range []Mode{ModeIncremental, ModeRerender} {
		h, err := New(mode, tk, []Message{{Role: RoleUser, Content: "Hi"}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.AddMessages(Message{Role: RoleUser, Content: "x"}); !errors.Is(err, ErrOrder) {
			t.Errorf("%s: AddMessages first: %v", mode, err)
		}
		if _, err := h.AddCompletion([]int32{1 << 30}); err == nil {
			t.Errorf("%s: out-of-vocabulary completion accepted", mode)
		}
		if _, err := h.AddCompletion(tk.Encode("ok<|im_end|>")); err != nil {
			t.Fatal(err)
		}
		if _, err := h.AddCompletion(tk.Encode("again")); !errors.Is(err, ErrOrder) {
			t.Errorf("%s: second AddCompletion: %v", mode, err)
		}
		if err := h.AddMessages(); err == nil {
			t.Errorf("%s: empty AddMessages accepted", mode)
		}
		if err := h.AddMessages(Message{Role: "developer", Content: "x"}); err == nil {
			t.Errorf("%s: unknown role accepted", mode)
		}
	}
	if _, err := New(ModeIncremental, tk, nil, Options{}); err == nil {
		t.Error("empty initial conversation accepted")
	}
	if _, err := New("bogus", tk, []Message{{Role: RoleUser}}, Options{}); err == nil {
		t.Error("unknown mode accepted")
	}
	if m, err := ParseMode(""); err != nil || m != ModeIncremental {
		t.Errorf("ParseMode(\"\") = %v, %v", m, err)
	}
	if _, err := ParseMode("x"); err == nil {
		t.Error("ParseMode(x): want error")
	}
}

func BenchmarkIncrementalStep(b *testing.B) {
	tk := tokenizertest.Qwen3(b)
	cases := handRenderCases()
	full := cases[7].Messages
	gen := tk.Encode("<tool_call>\n{\"name\": \"get_user_details\", \"arguments\": {\"user_id\": \"mia_li_3668\"}}\n</tool_call><|im_end|>")
	for b.Loop() {
		h, err := New(ModeIncremental, tk, full[:3], Options{Tools: fixtureTools})
		if err != nil {
			b.Fatal(err)
		}
		for range 10 {
			if _, err := h.AddCompletion(gen); err != nil {
				b.Fatal(err)
			}
			if err := h.AddMessages(full[4]); err != nil {
				b.Fatal(err)
			}
		}
	}
}
