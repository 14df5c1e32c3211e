package pyjson

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goldenLines reads a JSONL golden file with Loads (encoding/json would
// replace the lone surrogates some lines contain).
func goldenLines(t *testing.T, name string) []*Object {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*Object
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		o, err := LoadsObject(sc.Text())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, o)
	}
	return out
}

func str(o *Object, k string) string {
	v, _ := o.Get(k)
	s, _ := v.(string)
	return s
}

// TestLoadsDumpsGolden checks json.dumps(json.loads(s)) against CPython for
// the default, sort_keys and ensure_ascii=False variants.
func TestLoadsDumpsGolden(t *testing.T) {
	for _, g := range goldenLines(t, "loads_dumps.jsonl") {
		in := str(g, "in")
		v, err := Loads(in)
		if err != nil {
			t.Errorf("Loads(%q): %v", in, err)
			continue
		}
		for _, c := range []struct {
			key string
			opt Options
		}{{"dumps", Options{}}, {"sorted", Options{SortKeys: true}}, {"utf8", Options{UTF8: true}}} {
			got, err := Append(nil, v, c.opt)
			if err != nil {
				t.Errorf("%s(%q): %v", c.key, in, err)
				continue
			}
			if want := str(g, c.key); string(got) != want {
				t.Errorf("%s(%q) = %q, want %q", c.key, in, got, want)
			}
		}
	}
}

func TestLoadsErrorsGolden(t *testing.T) {
	for _, g := range goldenLines(t, "errors.jsonl") {
		in := str(g, "in")
		_, err := Loads(in)
		if err == nil {
			t.Errorf("Loads(%q) succeeded", in)
			continue
		}
		if want := str(g, "error"); err.Error() != want {
			t.Errorf("Loads(%q) error %q, want %q", in, err, want)
		}
	}
}

func TestFloatReprGolden(t *testing.T) {
	for _, g := range goldenLines(t, "floats.jsonl") {
		bv, _ := g.Get("bits")
		var bits uint64
		switch x := bv.(type) {
		case int64:
			bits = uint64(x)
		default:
			n, _ := x.(interface{ Uint64() uint64 })
			if n == nil {
				t.Fatalf("bits %T", bv)
			}
			bits = n.Uint64()
		}
		f := math.Float64frombits(bits)
		if got, want := FloatRepr(f), str(g, "repr"); got != want {
			t.Errorf("FloatRepr(%v) = %s, want %s", f, got, want)
		}
		if got, want := string(appendJSONFloat(nil, f)), str(g, "json"); got != want {
			t.Errorf("json float %v = %s, want %s", f, got, want)
		}
	}
}

func TestMapSemantics(t *testing.T) {
	var m Map[int]
	m.Set("b", 1)
	m.Set("a", 2)
	m.Set("b", 3) // keeps position
	if got := strings.Join(m.Keys(), ","); got != "b,a" {
		t.Fatalf("keys %s", got)
	}
	if v, _ := m.Get("b"); v != 3 {
		t.Fatalf("b=%d", v)
	}
	if !m.Delete("b") || m.Delete("b") {
		t.Fatal("delete")
	}
	m.Set("b", 4) // re-added at the end
	if got := MustDumps(&m); got != `{"a": 2, "b": 4}` {
		t.Fatalf("dump %s", got)
	}
	if got, _ := DumpsSorted(NewObject("b", 1, "a", NewObject("d", 1, "c", 2))); got != `{"a": {"c": 2, "d": 1}, "b": 1}` {
		t.Fatalf("sorted %s", got)
	}
}

type rec struct {
	ID    string   `json:"id"`
	N     int64    `json:"n"`
	F     float64  `json:"f"`
	Opt   *string  `json:"opt"`
	Tags  []string `json:"tags"`
	Extra Map[int] `json:"extra" pydantic:"optional"`
}

func TestTableCopyOnWrite(t *testing.T) {
	base := NewMap[*rec](3)
	for _, id := range []string{"x", "y", "z"} {
		base.Set(id, &rec{ID: id, Tags: []string{"t"}})
	}
	tb := NewTable(base)
	a, b := tb.Fork(), tb.Fork()
	r, _ := a.Mut("y")
	r.N = 7
	r.Tags[0] = "changed"
	if orig, _ := tb.Get("y"); orig.N != 0 || orig.Tags[0] != "t" {
		t.Fatal("Mut changed the shared base")
	}
	if other, _ := b.Get("y"); other.N != 0 {
		t.Fatal("Mut leaked into a sibling fork")
	}
	a.Set("w", &rec{ID: "w"})
	a.Delete("x")
	a.Set("x", &rec{ID: "x2"}) // deleted then re-added: goes last
	if got := strings.Join(a.Keys(), ","); got != "y,z,w,x" {
		t.Fatalf("keys %s", got)
	}
	if a.Len() != 4 || b.Len() != 3 {
		t.Fatalf("len %d %d", a.Len(), b.Len())
	}
	// Sorted encoding with cached base records equals a plain encoding.
	plain := NewMap[*rec](4)
	for k, v := range a.All() {
		plain.Set(k, v)
	}
	got, err := DumpsSorted(&a)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := DumpsSorted(plain)
	if got != want {
		t.Fatalf("table sorted dump\n got %s\nwant %s", got, want)
	}
	// Fork of a changed table is independent of later changes to it.
	c := a.Fork()
	r2, _ := a.Mut("z")
	r2.N = 99
	if z, _ := c.Get("z"); z.N != 0 {
		t.Fatal("fork of changed table saw a later change")
	}
	if c.baseID() != tb.baseID() || a.baseID() != tb.baseID() {
		t.Fatal("forking a changed table must keep the shared base (fast Equal)")
	}
	if y, _ := c.Get("y"); y == r {
		t.Fatal("fork shares a changed record with its source")
	}
	// Equal works through changes only and agrees with the dumps.
	eq, err := Equal(&a, &c)
	if err != nil || eq {
		t.Fatalf("Equal = %v, %v; want false", eq, err)
	}
	r3, _ := c.Mut("z")
	r3.N = 99
	if eq, err := Equal(&a, &c); err != nil || !eq {
		t.Fatalf("Equal = %v, %v; want true", eq, err)
	}
}

func TestFromValue(t *testing.T) {
	v, _ := Loads(`{"id": "a", "n": 2.0, "f": 3, "opt": null, "tags": ["x"]}`)
	var r rec
	if err := FromValue(v, &r); err != nil {
		t.Fatal(err)
	}
	if r.N != 2 || r.F != 3 || r.Opt != nil || r.Tags[0] != "x" {
		t.Fatalf("%+v", r)
	}
	if got := MustDumps(&r); got != `{"id": "a", "n": 2, "f": 3.0, "opt": null, "tags": ["x"], "extra": {}}` {
		t.Fatalf("dump %s", got)
	}
	for _, c := range []struct{ in, want string }{
		{`{"id": 1, "n": 1, "f": 1, "tags": []}`, "1 validation error for rec\nid\n  Input should be a valid string [type=string_type, input_value=1, input_type=int]"},
		{`{"id": "a", "n": 1.5, "f": "x", "tags": [1]}`, "3 validation errors for rec\nn\n  Input should be a valid integer, got a number with a fractional part [type=int_from_float, input_value=1.5, input_type=float]"},
		{`{"n": 1, "f": 1, "tags": []}`, "1 validation error for rec\nid\n  Field required [type=missing, input_value={'n': 1, 'f': 1, 'tags': []}, input_type=dict]"},
		{`[]`, "1 validation error for rec\n  Input should be a valid dictionary or instance of rec [type=model_type, input_value=[], input_type=list]"},
	} {
		v, _ := Loads(c.in)
		err := FromValue(v, &r)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("FromValue(%s):\n got %v\nwant prefix %q", c.in, err, c.want)
		}
	}
}

func TestMergeInto(t *testing.T) {
	type db struct {
		Recs  Table[*rec] `json:"recs"`
		Other Map[int]    `json:"other"`
	}
	var d db
	if err := Unmarshal([]byte(`{"recs": {"a": {"id": "a", "n": 1, "f": 1.5, "opt": "o", "tags": ["t"]}}, "other": {"k": 1}}`), &d); err != nil {
		t.Fatal(err)
	}
	upd, _ := LoadsObject(`{"recs": {"a": {"n": 5, "tags": ["u", "v"]}, "b": {"id": "b", "n": 2, "f": 0, "opt": null, "tags": []}}, "other": {"j": 2}}`)
	if err := MergeInto(&d, upd); err != nil {
		t.Fatal(err)
	}
	want := `{"recs": {"a": {"id": "a", "n": 5, "f": 1.5, "opt": "o", "tags": ["u", "v"], "extra": {}}, "b": {"id": "b", "n": 2, "f": 0.0, "opt": null, "tags": [], "extra": {}}}, "other": {"k": 1, "j": 2}}`
	if got := MustDumps(&d); got != want {
		t.Fatalf("merged\n got %s\nwant %s", got, want)
	}
	bad, _ := LoadsObject(`{"nope": 1}`)
	if err := MergeInto(&d, bad); err == nil {
		t.Fatal("extra key accepted")
	}
}

func TestDeepCopy(t *testing.T) {
	o, _ := LoadsObject(`{"a": [1, {"b": 2}], "c": "d"}`)
	c := DeepCopy(o)
	l, _ := c.Get("a")
	l.([]any)[1].(*Object).Set("b", int64(3))
	if MustDumps(o) != `{"a": [1, {"b": 2}], "c": "d"}` {
		t.Fatal("copy aliased the original")
	}
}

func TestStrAndRepr(t *testing.T) {
	for _, c := range []struct {
		v    any
		str  string
		repr string
	}{
		{int64(4), "4", "4"}, {4.0, "4.0", "4.0"}, {true, "True", "True"}, {nil, "None", "None"},
		{"it's", "it's", `"it's"`}, {"a'b\"c", "a'b\"c", `'a\'b"c'`}, {[]any{"x", int64(1)}, "", "['x', 1]"},
	} {
		if c.str != "" {
			if got := Str(c.v); got != c.str {
				t.Errorf("Str(%v) = %s, want %s", c.v, got, c.str)
			}
		}
		if got := Repr(c.v); got != c.repr {
			t.Errorf("Repr(%v) = %s, want %s", c.v, got, c.repr)
		}
	}
}

func TestEncodeRejectsGoMap(t *testing.T) {
	if _, err := Dumps(map[string]int{"a": 1}); err == nil {
		t.Fatal("unordered Go map encoded")
	}
	if s, err := DumpsSorted(map[string]int{"b": 1, "a": 2}); err != nil || s != `{"a": 2, "b": 1}` {
		t.Fatalf("sorted Go map: %s %v", s, err)
	}
}

func TestMaxDepth(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if _, err := Loads(deep); err == nil {
		t.Fatal("accepted nesting beyond MaxDepth")
	}
}
