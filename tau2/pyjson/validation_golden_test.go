package pyjson

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The models of testdata/gen_validation_golden.py, field for field.
type (
	Payment struct {
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
	}
	Order struct {
		OrderID    string   `json:"order_id"`
		ItemIDs    []string `json:"item_ids"`
		Quantities []int64  `json:"quantities"`
		Total      float64  `json:"total"`
		Payment    Payment  `json:"payment"`
		Note       *string  `json:"note"`
	}
	Count struct {
		N int64 `json:"n"`
	}
	Name struct {
		S string `json:"s"`
	}
	Flag struct {
		On bool `json:"on"`
	}
)

// TestValidationErrorGolden checks ValidationError's text against real
// pydantic's str(ValidationError) for the same JSON input: truncated
// input_value= reprs (byte lengths around 50, multi-byte characters at
// the cuts), Python's string repr escapes, and multi-error models.
func TestValidationErrorGolden(t *testing.T) {
	lines := goldenLines(t, "validation_errors.jsonl")
	if len(lines) < 50 {
		t.Fatalf("only %d golden lines", len(lines))
	}
	for _, g := range lines {
		in, model := str(g, "in"), str(g, "model")
		want := strings.ReplaceAll(str(g, "error"), "errors.pydantic.dev/"+str(g, "pydantic")+"/",
			"errors.pydantic.dev/"+PydanticVersion+"/")
		var err error
		switch model {
		case "Payment":
			err = Unmarshal([]byte(in), new(Payment))
		case "Order":
			err = Unmarshal([]byte(in), new(Order))
		case "Count":
			err = Unmarshal([]byte(in), new(Count))
		case "Name":
			err = Unmarshal([]byte(in), new(Name))
		case "Flag":
			err = Unmarshal([]byte(in), new(Flag))
		default:
			t.Fatalf("golden model %q has no Go mirror", model)
		}
		if err == nil {
			t.Errorf("%s %s: validated, want\n%s", model, in, want)
			continue
		}
		if err.Error() != want {
			t.Errorf("%s %s:\n got %q\nwant %q", model, in, err.Error(), want)
		}
	}
}

// TestTruncateRepr: Python reprs at the 50-byte limit (the expected
// strings are pydantic 2.13's input_value= for Count(n=<the value>)), and
// the unchanged and degenerate cases.
func TestTruncateRepr(t *testing.T) {
	for _, c := range []struct {
		s     string
		limit int
		want  string
	}{
		{"'" + strings.Repeat("q", 48) + "'", 50, "'" + strings.Repeat("q", 48) + "'"},
		{"'" + strings.Repeat("q", 49) + "'", 50, "'" + strings.Repeat("q", 24) + "..." + strings.Repeat("q", 23) + "'"},
		{"'ab" + strings.Repeat("😀", 15) + "'", 50, "'ab😀😀😀😀😀...😀😀😀😀😀'"},
		{"['credit_card_1234567', 'gift_card_7654321', 'paypal_1111111']", 50, "['credit_card_1234567', '...4321', 'paypal_1111111']"},
		{"", 50, ""},
		{"0123456789", -1, "0123456789"},
		{"0123456789", 10, "0123456789"},
		{"0123456789A", 10, "01234...789A"},
		{"0123456789", 0, "..."},
	} {
		if got := TruncateRepr(c.s, c.limit); got != c.want {
			t.Errorf("TruncateRepr(%q, %d) = %q, want %q", c.s, c.limit, got, c.want)
		}
	}
}

// FuzzTruncateRepr: a string over the limit becomes a prefix of it, "...",
// and a suffix of it, within pydantic-core's byte budget, and valid UTF-8
// stays valid; anything else comes back unchanged.
func FuzzTruncateRepr(f *testing.F) {
	for _, s := range []string{"", "abc", strings.Repeat("é", 40), strings.Repeat("😀x", 20), "\xff\xfe" + strings.Repeat("a", 60),
		strings.Repeat("...", 30)} {
		f.Add(s, 50)
	}
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit > 1<<20 || limit < -1 {
			return
		}
		got := TruncateRepr(s, limit)
		if len(s) <= limit || limit < 0 {
			if got != s {
				t.Fatalf("TruncateRepr(%q, %d) = %q, want unchanged", s, limit, got)
			}
			return
		}
		// got must be s[:h] + "..." + s[len(s)-tl:] with h <= ceil(limit/2)
		// and tl <= ceil(limit/2)-1, each short of that by at most 3 bytes
		// (a character straddling the cut) when s is UTF-8.
		mid := (limit + 1) / 2
		valid := utf8.ValidString(s)
		found := false
		for h := 0; h <= mid && h <= len(s) && !found; h++ {
			tl := len(got) - 3 - h
			if tl < 0 || tl > max(mid-1, 0) || tl > len(s) {
				continue
			}
			if valid && (h < mid-3 || tl < mid-4) {
				continue
			}
			found = got == s[:h]+"..."+s[len(s)-tl:]
		}
		if !found {
			t.Fatalf("TruncateRepr(%q, %d) = %q: not a prefix, \"...\" and a suffix within the budget", s, limit, got)
		}
		if valid && !utf8.ValidString(got) {
			t.Fatalf("TruncateRepr(%q, %d) = %q: split a character", s, limit, got)
		}
	})
}

// TestLaxBoolField: a bool model field accepts what pydantic's lax mode does (values checked
// against pydantic 2.13: Flag.model_validate(json.loads(in)).on); the rejections are the goldens.
func TestLaxBoolField(t *testing.T) {
	for in, want := range map[string]bool{
		"true": true, "false": false, "1": true, "0": false, "1.0": true, "0.0": false,
		`"yes"`: true, `"Off"`: false, `"T"`: true, `"1"`: true, `"YES"`: true, `"on"`: true, `"n"`: false,
	} {
		var f Flag
		if err := Unmarshal([]byte(`{"on": `+in+`}`), &f); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if f.On != want {
			t.Errorf("%s: on = %v, want %v", in, f.On, want)
		}
	}
}
