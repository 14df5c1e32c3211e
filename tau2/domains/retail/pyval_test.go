package retail

import (
	"slices"
	"testing"

	"tau2rl/tau2/pyjson"
)

// Expected values were printed by CPython 3.11 (str.lower()).
func TestPyLower(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ABC", "abc"},
		{"Yusuf Rossi", "yusuf rossi"},
		{"\u0130nce", "i\u0307nce"},
		{"\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3", "\u03bf\u03b4\u03c5\u03c3\u03c3\u03b5\u03c5\u03c2"},
		{"\u03a3", "\u03c3"},
		{"A\u03a3", "a\u03c2"},
		{"A\u03a3B", "a\u03c3b"},
		{"A\u03a3.", "a\u03c2."},
		{"A.\u03a3", "a.\u03c2"},
		{"A'\u03a3 x", "a'\u03c2 x"},
		{"\u03a3\u0301A", "\u03c3\u0301a"},
		{"A\u03a3\u0301", "a\u03c2\u0301"},
		{"\u00c9T\u00c9", "\u00e9t\u00e9"},
		{"\u1e9e", "\u00df"},
		{"\u2160", "\u2170"},
		{"\u24b6", "\u24d0"},
		{"Hern\u00c1ndez \U0001F600", "hern\u00e1ndez \U0001F600"},
		{"\u0130\u0130", "i\u0307i\u0307"},
		{"K\u212a", "kk"},
		{"\u01c5", "\u01c6"},
		{"DZ\u01c4", "dz\u01c6"},
		{"\xed\xa0\x80A", "\xed\xa0\x80a"}, // lone surrogate (WTF-8) kept
		{"\xffA\xc3", "\xffa\xc3"},         // stray bytes kept
		{"", ""},
	} {
		if got := pyjson.Lower(c.in); got != c.want {
			t.Errorf("pyjson.Lower(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPyChars(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"ab", []string{"a", "b"}},
		{"é\U0001F600", []string{"é", "\U0001F600"}},
		{"a\xed\xa0\x80b", []string{"a", "\xed\xa0\x80", "b"}},
		{"\xff\xed\xa0", []string{"\xff", "\xed", "\xa0"}},
	} {
		if got := pyChars(c.in); !slices.Equal(got, c.want) {
			t.Errorf("pyChars(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPyValues(t *testing.T) {
	obj := pyjson.NewObject("a", nil, "b", "it's")
	for _, c := range []struct {
		v                any
		str, iterErr     string
		length           int
		lenErr, lowerErr string
	}{
		{v: "ab", str: "ab", length: 2},
		{v: []any{"x", int64(1)}, str: "['x', 1]", length: 2, lowerErr: "'list' object has no attribute 'lower'"},
		{v: obj, str: `{'a': None, 'b': "it's"}`, length: 2, lowerErr: "'dict' object has no attribute 'lower'"},
		{v: int64(5), str: "5", iterErr: "'int' object is not iterable", lenErr: "object of type 'int' has no len()", lowerErr: "'int' object has no attribute 'lower'"},
		{v: 1.5, str: "1.5", iterErr: "'float' object is not iterable", lenErr: "object of type 'float' has no len()", lowerErr: "'float' object has no attribute 'lower'"},
		{v: nil, str: "None", iterErr: "'NoneType' object is not iterable", lenErr: "object of type 'NoneType' has no len()", lowerErr: "'NoneType' object has no attribute 'lower'"},
		{v: true, str: "True", iterErr: "'bool' object is not iterable", lenErr: "object of type 'bool' has no len()", lowerErr: "'bool' object has no attribute 'lower'"},
	} {
		if got := pyStr(c.v); got != c.str {
			t.Errorf("pyStr(%v) = %q, want %q", c.v, got, c.str)
		}
		if _, err := iterate(c.v); errText(err) != c.iterErr {
			t.Errorf("iterate(%v): %v, want %q", c.v, err, c.iterErr)
		}
		if n, err := pyLen(c.v); errText(err) != c.lenErr || err == nil && n != c.length {
			t.Errorf("pyLen(%v) = %d, %v", c.v, n, err)
		}
		if _, err := pyLowerOf(c.v); errText(err) != c.lowerErr {
			t.Errorf("pyLowerOf(%v): %v, want %q", c.v, err, c.lowerErr)
		}
	}
	for _, c := range []struct {
		v   any
		ok  bool
		err string
	}{{"k", true, ""}, {int64(1), false, ""}, {nil, false, ""}, {[]any{}, false, "unhashable type: 'list'"}, {obj, false, "unhashable type: 'dict'"}} {
		if _, ok, err := dictKey(c.v); ok != c.ok || errText(err) != c.err {
			t.Errorf("dictKey(%v) = %v, %v", c.v, ok, err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzPyLower checks pyLower on arbitrary bytes: no panic, ASCII input
// handled like the general path, and non-letters preserved.
func FuzzPyLower(f *testing.F) {
	for _, s := range []string{"ABC", "\u0130nce", "A\u03a3.", "\xed\xa0\x80", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := pyjson.Lower(s)
		if len(pyChars(got)) < len(pyChars(s)) {
			t.Fatalf("pyjson.Lower(%q) = %q lost code points", s, got)
		}
		if pyjson.Lower(s+"\u00e9") != got+"\u00e9" && !slices.ContainsFunc([]rune(s), func(r rune) bool { return r == 0x3A3 }) {
			t.Fatalf("pyjson.Lower(%q) depends on a later non-ASCII letter", s)
		}
	})
}

func TestLowerEquals(t *testing.T) {
	for _, s := range []string{"ABC", "abc", "Yusuf", "\u0130nce", "A\u03a3", "", "x\xff", "Me\u00ef"} {
		for _, l := range []string{"abc", "yusuf", "i\u0307nce", "a\u03c2", "", "x\xff", "me\u00ef", "abd", "ab"} {
			if got, want := lowerEquals(s, l), pyjson.Lower(s) == l; got != want {
				t.Errorf("lowerEquals(%q, %q) = %v, want %v", s, l, got, want)
			}
		}
	}
}
