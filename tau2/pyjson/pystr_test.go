package pyjson

import (
	"math/big"
	"testing"
)

// The expected values are what pydantic 2.13's TypeAdapter(bool).validate_python returns (or
// rejects) for the same inputs.
func TestLaxBool(t *testing.T) {
	tests := []struct {
		in       any
		want, ok bool
	}{
		{true, true, true}, {false, false, true},
		{int64(1), true, true}, {int64(0), false, true}, {int64(2), false, false},
		{1.0, true, true}, {0.0, false, true}, {0.5, false, false},
		{"TRUE", true, true}, {"True", true, true}, {"yes", true, true}, {"On", true, true},
		{"1", true, true}, {"0", false, true}, {"off", false, true}, {"N", false, true},
		{" true ", false, false}, {" 0", false, false}, {"ı", false, false}, {"i\u0307", false, false},
		{"", false, false}, {nil, false, false}, {big.NewInt(1), false, false},
	}
	for _, tt := range tests {
		got, ok := LaxBool(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("LaxBool(%#v) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestStripAndCharLen(t *testing.T) {
	if got := Strip("\x1c\u00a0 a b\u2028\n"); got != "a b" {
		t.Errorf("Strip = %q", got)
	}
	s := "a\xed\xa0\x80é"
	var units []int
	for i := 0; i < len(s); i += CharLen(s, i) {
		units = append(units, CharLen(s, i))
	}
	if len(units) != 3 || units[0] != 1 || units[1] != 3 || units[2] != 2 {
		t.Errorf("code point lengths of %q = %v, want [1 3 2]", s, units)
	}
	if got := Lower("ÀΣ\xed\xa0\x80"); got != "àς\xed\xa0\x80" {
		t.Errorf("Lower kept surrogate / final sigma wrong: %q", got)
	}
}
