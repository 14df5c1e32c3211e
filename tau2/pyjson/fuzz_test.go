package pyjson

import (
	"bytes"
	"testing"
)

// FuzzLoads: Loads never panics; whatever it accepts re-encodes, and the
// encoding is a fixed point (dumps(loads(dumps(x))) == dumps(x)) in all
// three variants.
func FuzzLoads(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, "x\u00e9\ud83d\ude00", null, true]}`, `"\ud800"`, `NaN`, `-Infinity`,
		`1e400`, `123456789012345678901234567890`, `{"b":1,"a":2,"b":3}`, "[\"\x7f\"]", `[1.0, -0.0, 5e-324]`, "\"\xff\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Loads(s)
		if err != nil {
			return
		}
		for _, opt := range []Options{{}, {SortKeys: true}, {UTF8: true}} {
			enc, err := Append(nil, v, opt)
			if err != nil {
				t.Fatalf("encode %q: %v", s, err)
			}
			v2, err := Loads(string(enc))
			if err != nil {
				t.Fatalf("reload %q (from %q): %v", enc, s, err)
			}
			enc2, err := Append(nil, v2, opt)
			if err != nil || !bytes.Equal(enc, enc2) {
				t.Fatalf("not a fixed point: %q -> %q (%v)", enc, enc2, err)
			}
		}
		if _, err := Hash(v); err != nil {
			t.Fatal(err)
		}
		c := DeepCopy(v)
		if eq, err := Equal(v, c); err != nil || !eq {
			t.Fatalf("copy differs: %v %v", eq, err)
		}
	})
}

// FuzzFromValue: validating arbitrary JSON into a model never panics.
func FuzzFromValue(f *testing.F) {
	f.Add(`{"id": "a", "n": 1, "f": 1.5, "opt": null, "tags": ["x"], "extra": {"k": 1}}`)
	f.Add(`{"id": 1, "n": "2", "f": true, "tags": [[]]}`)
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Loads(s)
		if err != nil {
			return
		}
		var r rec
		if err := FromValue(v, &r); err == nil {
			if _, err := Dumps(&r); err != nil {
				t.Fatal(err)
			}
		} else {
			_ = err.Error()
		}
		if o, ok := v.(*Object); ok {
			var d struct {
				Recs Table[*rec] `json:"recs" pydantic:"optional"`
			}
			_ = MergeInto(&d, o)
		}
	})
}
