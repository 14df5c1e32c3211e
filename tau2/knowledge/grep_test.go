package knowledge

import (
	"sort"
	"testing"
)

func TestGrep(t *testing.T) {
	kb := New([]Document{
		{ID: "a", Content: "Credit card fee. credit CARD"},
		{ID: "b", Content: "fee fee fee"},
		{ID: "c", Content: "nothing here"},
		{ID: "d", Content: "a (b) c"},
		{ID: "e", Content: "fee|charge"},
	})
	g := &Grep{KB: kb, TopK: 10}
	for _, c := range []struct {
		q    string
		want []Hit
	}{
		{"credit", []Hit{{"a", 2}}},                           // case-insensitive
		{"fee|charge", []Hit{{"b", 3}, {"e", 2}, {"a", 1}}},   // regex alternation, ties in KB order
		{"(b", []Hit{{"d", 1}}},                               // invalid regex: literal
		{"(?=x)fee", []Hit{{"b", 3}, {"a", 1}, {"e", 1}}[:0]}, // RE2 lacks look-ahead: literal "(?=x)fee", no match
		{"  ", nil},                       // blank
		{"credit.*card", []Hit{{"a", 1}}}, // greedy, non-overlapping
	} {
		got := g.Search(c.q)
		if len(got) != len(c.want) {
			t.Errorf("%q: %v, want %v", c.q, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q: %v, want %v", c.q, got, c.want)
			}
		}
	}
	cs := &Grep{KB: kb, TopK: 1, CaseSensitive: true}
	if got := cs.Search("CARD"); len(got) != 1 || got[0] != (Hit{"a", 1}) {
		t.Errorf("case-sensitive top-1: %v", got)
	}
}

// FuzzGrep: any pattern (the agent's input) compiles or falls back to a
// literal; never a panic.
func FuzzGrep(f *testing.F) {
	for _, s := range []string{"a", "(", "[a-", "\\", "(?P<x>a)", "a{2,1}", "\xff"} {
		f.Add(s)
	}
	kb := New([]Document{{ID: "x", Content: "abc (a) [b] \\ fee"}})
	f.Fuzz(func(t *testing.T, q string) {
		(&Grep{KB: kb, TopK: 3}).Search(q)
	})
}

// TestGrepLiteralFastPath: on the real corpus, the ASCII-literal fast path
// gives exactly the regexp path's hits.
func TestGrepLiteralFastPath(t *testing.T) {
	kb := loadRealKB(t)
	fast := &Grep{KB: kb, TopK: 698}
	for _, q := range []string{"provisional credit", "FEE", "card", "a", "  fee", "Rho-Bank", "e", "zz_none", "aa"} {
		if !literalASCII(q) {
			t.Fatalf("%q should take the fast path", q)
		}
		got := fast.Search(q)
		re := compilePy(q, false)
		var want []Hit
		for _, d := range kb.Docs {
			if n := len(re.FindAllStringIndex(d.Content, -1)); n > 0 {
				want = append(want, Hit{d.ID, float64(n)})
			}
		}
		sort.SliceStable(want, func(a, b int) bool { return want[a].Score > want[b].Score })
		if len(got) != len(want) {
			t.Fatalf("%q: %d hits, regexp %d", q, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q hit %d: %v, regexp %v", q, i, got[i], want[i])
			}
		}
	}
	kelvin := New([]Document{{ID: "k", Content: "\u212aelvin kelvin"}, {ID: "s", Content: "Straße \u017ftraße"}})
	for q, want := range map[string]float64{"kelvin": 2, "stra": 2} {
		if h := (&Grep{KB: kelvin, TopK: 5}).Search(q); len(h) != 1 || h[0].Score != want {
			t.Errorf("%q on folding letters: %v, want %v matches", q, h, want)
		}
	}
	if literalASCII("a.b") || literalASCII("é") {
		t.Error("regex or non-ASCII pattern on the fast path")
	}
}
