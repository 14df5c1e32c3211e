package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
)

func canonical(tb testing.TB, s string) string {
	tb.Helper()
	var b bytes.Buffer
	if err := canonicalJSON(&b, []byte(s)); err != nil {
		tb.Fatalf("%s: %v", s, err)
	}
	return b.String()
}

// Texts of one value are one canonical text; texts of different values are
// not.
func TestCanonicalJSON(t *testing.T) {
	same := [][]string{
		{`1`, `1.0`, `1e0`, `10E-1`, `0.1e1`, `1.000e+0`, `100e-2`},
		{`0`, `-0`, `0.0`, `0e5`, `-0.000`},
		{`12345678901234567890`, `1.234567890123456789e19`, `12345678901234567890.00`},
		{`"café"`, `"caf\u00e9"`, `"caf\u00E9"`},
		{`"a<b>&"`, `"a\u003cb\u003e\u0026"`},
		{`{"b":1,"a":[1,{"d":2,"c":3}]}`, `{ "a" : [ 1.0 , { "c" : 3 , "d" : 2 } ] , "b" : 1e0 }`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`-0.5`, `-5e-1`, `-0.50`},
	}
	for _, group := range same {
		want := canonical(t, group[0])
		for _, s := range group[1:] {
			if got := canonical(t, s); got != want {
				t.Errorf("%s → %s, but %s → %s", s, got, group[0], want)
			}
		}
	}
	differ := [][2]string{
		{`1`, `2`}, {`1`, `-1`}, {`1`, `"1"`}, {`0.1`, `1`}, {`12345678901234567890`, `12345678901234567000`},
		{`{"a":1}`, `{"A":1}`}, {`[1,2]`, `[2,1]`}, {`null`, `false`}, {`1e400`, `1e401`},
		{`1e99999999999999999999`, `-1e99999999999999999999`},
	}
	for _, d := range differ {
		if a, b := canonical(t, d[0]), canonical(t, d[1]); a == b {
			t.Errorf("%s and %s both → %s", d[0], d[1], a)
		}
	}
	for _, bad := range []string{`{`, `1 2`, ``, `{"a":}`} {
		if err := canonicalJSON(&bytes.Buffer{}, []byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzCanonicalJSON: the canonical text is canonical (a fixed point), and a
// client's re-serialization of the parsed value (Go's encoder: other
// escaping, other key order, whitespace) has the same canonical text.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"a": 1.0, "b": "caf\u00e9"}`, `[1e2, -0, 0.5]`, `{"x": {"y": [true, null, "<&>"]}}`, `12345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b bytes.Buffer
		if canonicalJSON(&b, raw) != nil {
			return
		}
		c := b.String()
		if again := canonical(t, c); again != c {
			t.Fatalf("not a fixed point: %s → %s", c, again)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			t.Fatalf("canonicalJSON accepted what the decoder refuses: %q", raw)
		}
		re, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return // a json.Number the encoder refuses cannot be sent back
		}
		if got := canonical(t, string(re)); got != c {
			t.Fatalf("re-serialized %s → %s, original → %s", re, got, c)
		}
	})
}

// The text-length bound never refuses a conversation that fits: for text
// made of the tokenizer's longest tokens, of added tokens written in the
// text, of text the normalizer shortens, the bound stays ≤ the real count.
func TestTextLengthBoundIsSound(t *testing.T) {
	tok := tokenizertest.Qwen3(t)
	longest := longestToken(tok)
	if longest < 16 {
		t.Fatalf("longest token %d bytes", longest)
	}
	s := &Server{tok: tok, maxTokenBytes: longest, cfg: DefaultConfig()}
	for _, text := range []string{
		strings.Repeat(" ", 128*50),
		strings.Repeat("//"+strings.Repeat("-", 112), 40),
		strings.Repeat("<|im_start|>", 300),
		strings.Repeat("e\u0301", 2000),            // NFC shortens: é
		strings.Repeat("\u1100\u1161\u11a8", 1000), // Hangul jamo compose
		strings.Repeat("\xff\xfe", 1000),           // invalid UTF-8 → U+FFFD
		strings.Repeat("hello world, how are you? ", 500),
	} {
		msgs := []chattemplate.Message{{Role: chattemplate.RoleSystem, Content: text}, {Role: chattemplate.RoleUser, Content: text}, {Role: chattemplate.RoleTool, Content: text, ToolCallID: "c"}}
		h, err := chattemplate.New(chattemplate.ModeIncremental, tok, msgs, chattemplate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		real := len(h.Prompt())
		s.cfg.EngineMaxTokens = real + 1 // fits, with one token to generate
		if err := s.checkTextLength(msgs); err != nil {
			t.Fatalf("%.20q…: %d tokens, refused as at least more: %v", text, real, err)
		}
		s.cfg.EngineMaxTokens = 1
		if err := s.checkTextLength(msgs); err == nil && len(tok.Normalize(text)) > longest*3 {
			t.Fatalf("%.20q…: a %d-byte text fits a one-token context?", text, len(text))
		}
	}
}
