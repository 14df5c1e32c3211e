package chattemplate

import (
	"slices"
	"strings"
	"sync"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"testing"
)

// TestNewIncrementalEqualsNew: a history started from a cached Prefix gives
// exactly New(ModeIncremental)'s prompts for the same conversation, call
// after call, and the same messages.
func TestNewIncrementalEqualsNew(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	full := handRenderCases()[7].Messages // sys, greet, u1, a1, t1, a2, t2, t3, a3, u2
	sys, greet, u1, a1, t1, u2 := full[0], full[1], full[2], full[3], full[4], full[9]
	uni := Message{Role: RoleUser, Content: "Ünïcödé 你好 😀 \u0085\ufeff\r\n tab\t end  "}
	for _, tc := range []struct {
		name           string
		initial, first []Message
		opts           Options
	}{
		{"greeting", []Message{sys, greet}, []Message{u1}, Options{Tools: fixtureTools}},
		{"thinking off", []Message{sys, greet}, []Message{u1}, Options{Tools: fixtureTools[:1], EnableThinking: bptr(false)}},
		{"thinking on explicit", []Message{sys}, []Message{uni}, Options{EnableThinking: bptr(true)}},
		{"solo, no first turns", []Message{sys}, nil, Options{Tools: fixtureTools}},
		{"greeting in first", []Message{sys}, []Message{greet, uni}, Options{Tools: fixtureTools}},
		{"prefix without system", []Message{u1}, nil, Options{Tools: fixtureTools[:2]}},
		{"prefix ends with tool result", []Message{sys, u1, a1, t1}, []Message{u2}, Options{Tools: fixtureTools}},
		{"generation prompt flag ignored", []Message{sys, greet}, []Message{u1}, Options{Tools: fixtureTools, AddGenerationPrompt: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := New(ModeIncremental, tk, slices.Concat(tc.initial, tc.first), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewPrefix(tk, tc.initial, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewIncremental(p, tc.first)
			if err != nil {
				t.Fatal(err)
			}
			imEnd, _ := tk.AddedTokenID(IMEnd)
			steps := []struct {
				completion []int32
				next       []Message
			}{
				{append(tk.Encode("<think>\nI should look the user up.\n</think>\n\n<tool_call>\n{\"name\": \"get_user_details\", \"arguments\": {\"user_id\": \"mia_li_3668\"}}\n</tool_call>"), imEnd),
					[]Message{t1}},
				{tk.Encode("<tool_call>\n{\"name\": \"think\", \"arguments\": {\"thoughts\": \"x\"}}\n</tool_call>"), // cut: no <|im_end|>
					[]Message{{Role: RoleTool, Content: "ok"}, {Role: RoleTool, Content: "Error: missing"}}},
				{append(tk.Encode("Done, your reservation is cancelled."), imEnd), []Message{u2}},
			}
			for i, st := range steps {
				if !slices.Equal(got.Prompt(), ref.Prompt()) {
					g, _ := tk.Decode(got.Prompt())
					w, _ := tk.Decode(ref.Prompt())
					t.Fatalf("step %d: prompts differ (%d vs %d tokens):\n got %q\nwant %q", i, len(got.Prompt()), len(ref.Prompt()), tail(g), tail(w))
				}
				c1, err1 := got.AddCompletion(st.completion)
				c2, err2 := ref.AddCompletion(st.completion)
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
			if gm, rm := got.Messages(), ref.Messages(); len(gm) != len(rm) || gm[len(gm)-1].Content != rm[len(rm)-1].Content {
				t.Errorf("messages differ: %d vs %d", len(gm), len(rm))
			}
		})
	}
}

func TestPrefixErrors(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	sys := Message{Role: RoleSystem, Content: "S"}
	tool := Message{Role: RoleTool, Content: "r"}
	good, err := NewPrefix(tk, []Message{sys}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	endsTool, err := NewPrefix(tk, []Message{{Role: RoleUser, Content: "u"}, tool}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"nil tokenizer", func() error { _, err := NewPrefix(nil, []Message{sys}, Options{}); return err }, "nil tokenizer"},
		{"empty conversation", func() error { _, err := NewPrefix(tk, nil, Options{}); return err }, ""},
		{"unknown role in prefix", func() error { _, err := NewPrefix(tk, []Message{{Role: "developer"}}, Options{}); return err }, ""},
		{"nil prefix", func() error { _, err := NewIncremental(nil, nil); return err }, "nil prefix"},
		{"unknown role in first", func() error {
			_, err := NewIncremental(good, []Message{{Role: RoleUser}, {Role: "developer"}})
			return err
		}, `first message 1: role "developer"`},
		{"tool result after the prefix's tool result", func() error { _, err := NewIncremental(endsTool, []Message{tool}); return err }, "group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	if _, err := NewIncremental(endsTool, []Message{{Role: RoleUser, Content: "u2"}}); err != nil {
		t.Errorf("user turn after a tool-result prefix: %v", err)
	}
}

// TestPrefixShared: histories started from one Prefix, concurrently, never
// see each other's tokens, and the prefix's ids stay as they were.
func TestPrefixShared(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	p, err := NewPrefix(tk, []Message{{Role: RoleSystem, Content: "S"}, {Role: RoleAssistant, Content: "Hi"}}, Options{Tools: fixtureTools})
	if err != nil {
		t.Fatal(err)
	}
	before := slices.Clone(p.IDs())
	first, err := NewIncremental(p, []Message{{Role: RoleUser, Content: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(first.Prompt())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			h, err := NewIncremental(p, []Message{{Role: RoleUser, Content: "q"}})
			if err != nil {
				errs <- err
				return
			}
			for i := range 50 + g {
				if _, err := h.AddCompletion(tk.Encode(strings.Repeat("word ", i) + IMEnd)); err != nil {
					errs <- err
					return
				}
				if err := h.AddMessages(Message{Role: RoleUser, Content: "more"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if !slices.Equal(p.IDs(), before) {
		t.Error("prefix ids changed")
	}
	if !slices.Equal(first.Prompt(), want) {
		t.Error("a history changed when others grew")
	}
	if !slices.Equal(first.Prompt()[:len(before)], before) {
		t.Error("prompt does not start with the prefix")
	}
}

// BenchmarkNewIncremental starts a history from a cached prefix of about
// τ²'s size; compare BenchmarkIncrementalStep, which tokenizes it.
func BenchmarkNewIncremental(b *testing.B) {
	tk := tokenizertest.Qwen3(b)
	full := handRenderCases()[7].Messages
	sys := full[0]
	sys.Content = strings.Repeat(sys.Content+"\n", 60)
	p, err := NewPrefix(tk, []Message{sys, full[1]}, Options{Tools: fixtureTools})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(p.IDs())), "prefix-tokens")
	for b.Loop() {
		if _, err := NewIncremental(p, full[2:3]); err != nil {
			b.Fatal(err)
		}
	}
}
