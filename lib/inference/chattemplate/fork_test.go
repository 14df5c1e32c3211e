package chattemplate

import (
	"slices"
	"testing"

	"tau2rl/lib/inference/tokenizer/tokenizertest"
)

// Forks are independent: growing one never changes another, shared or
// not, as long as only one shared fork grows.
func TestFork(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	h, err := New(ModeIncremental, tk, []Message{{Role: RoleUser, Content: "hi"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := h.(*Incremental)
	prompt := slices.Clone(base.Prompt())
	shared := base.ForkShared()
	copied := base.Fork()
	if _, err := shared.AddCompletion(tk.Encode("one")); err != nil {
		t.Fatal(err)
	}
	if _, err := copied.AddCompletion(tk.Encode("two")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(base.Prompt(), prompt) {
		t.Fatal("growing a fork changed the original")
	}
	one, _ := tk.Decode(shared.Prompt()[len(prompt):])
	two, _ := tk.Decode(copied.Prompt()[len(prompt):])
	if one != "one<|im_end|>" || two != "two<|im_end|>" || !shared.Pending() || base.Pending() {
		t.Fatalf("forks hold %q and %q", one, two)
	}
	if len(shared.Messages()) != 2 || len(base.Messages()) != 1 {
		t.Fatal("fork messages are not independent")
	}
}

func TestPrefixCache(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	c := PrefixCache{Max: 1}
	sys := []Message{{Role: RoleSystem, Content: "a"}}
	p1, err := c.Get(tk, sys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p2, _ := c.Get(tk, sys, Options{}); p2 != p1 {
		t.Fatal("the same start was tokenized twice")
	}
	off := false
	p3, _ := c.Get(tk, sys, Options{EnableThinking: &off})
	if p3 == p1 || c.Len() != 1 {
		t.Fatalf("other options must not share a prefix, and Max bounds the cache (len %d)", c.Len())
	}
}

func TestVisibleText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"<think>\nx\n</think>\n\n hello ", "hello"},
		{"plain", "plain"},
		{"<think>a</think>b</think> c", "c"},
		{"<think>cut off", "<think>cut off"},
	} {
		if got := VisibleText(tc.in); got != tc.want {
			t.Errorf("VisibleText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
