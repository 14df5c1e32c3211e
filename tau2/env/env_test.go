package env

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"tau2rl/tau2/pyjson"
)

// A tiny test domain: a counter DB with a few tools.

type item struct {
	ID    string  `json:"id"`
	Count int64   `json:"count"`
	Price float64 `json:"price"`
	Note  *string `json:"note"`
}

type testDB struct {
	Items pyjson.Table[*item] `json:"items"`
}

func (db *testDB) Fork() DB { return &testDB{Items: db.Items.Fork()} }

func schema(name string, params ...string) string {
	props := &pyjson.Object{}
	var req []any
	for _, p := range params {
		opt := strings.HasSuffix(p, "?")
		p = strings.TrimSuffix(p, "?")
		props.Set(p, pyjson.NewObject("type", "string"))
		if !opt {
			req = append(req, p)
		}
	}
	par := pyjson.NewObject("properties", props)
	if len(req) > 0 {
		par.Set("required", req)
	}
	par.Set("title", "parameters")
	par.Set("type", "object")
	return pyjson.MustDumps(pyjson.NewObject("type", "function", "function", pyjson.NewObject("name", name, "description", "d", "parameters", par)))
}

var testToolkit = MustToolkit("TestTools", []*Tool{
	NewTool("get", Read, schema("get", "id"), func(db *testDB, a *Args) (any, error) {
		id := a.Str("id")
		if err := a.Err(); err != nil {
			return nil, err
		}
		it, ok := db.Items.Get(id)
		if !ok {
			return nil, fmt.Errorf("Item %s not found", id)
		}
		return it, nil
	}),
	NewTool("add", Write, schema("add", "id", "n"), func(db *testDB, a *Args) (any, error) {
		id, n := a.Str("id"), a.Int("n")
		if err := a.Err(); err != nil {
			return nil, err
		}
		it, ok := db.Items.Mut(id)
		if !ok {
			it = &item{ID: id}
			db.Items.Set(id, it)
		}
		it.Count += n
		if it.Count > 100 {
			return nil, errors.New("too many") // after mutating: the mutation stays
		}
		return it.Count, nil
	}),
	NewTool("stats", Read, schema("stats", "verbose?"), func(db *testDB, a *Args) (any, error) {
		return pyjson.NewObject("n", int64(db.Items.Len()), "ok", true, "avg", 2.0, "items", db.Items.Keys(), "none", nil), nil
	}),
	NewTool("boom", Generic, schema("boom"), func(db *testDB, a *Args) (any, error) {
		var missing *testDB
		return missing.Items.Len(), nil // nil dereference: a Go bug, recovered as a tool error
	}),
	NewTool("emoji", Read, schema("emoji"), func(db *testDB, a *Args) (any, error) {
		return "📶 ok ✈️", nil
	}),
},
	NewEnvFunc("assert_count", []Param{{Name: "id", Required: true}, {Name: "n", Required: true}}, func(db *testDB, a *Args) (any, error) {
		it, ok := db.Items.Get(a.Str("id"))
		return ok && it.Count == a.Int("n"), a.Err()
	}),
	NewEnvFunc("not_bool", nil, func(db *testDB, a *Args) (any, error) { return "yes", nil }),
)

func newTestEnv(t *testing.T) *Environment {
	t.Helper()
	var db testDB
	if err := pyjson.Unmarshal([]byte(`{"items": {"a": {"id": "a", "count": 1, "price": 2.5, "note": null}}}`), &db); err != nil {
		t.Fatal(err)
	}
	return &Environment{Domain: "test", Agent: Side{Toolkit: testToolkit, DB: db.Fork()}}
}

func TestCall(t *testing.T) {
	for _, c := range []struct {
		name, args, want string
		isErr            bool
	}{
		{"get", `{"id": "a"}`, `{"id": "a", "count": 1, "price": 2.5, "note": null}`, false},
		{"get", `{"id": "zz"}`, `Error: Item zz not found`, true},
		{"get", `{"id": 5}`, `Error: get: argument 'id' must be str, not int`, true},
		{"get", `{}`, `Error: TestTools.get() missing 1 required positional argument: 'id'`, true},
		{"get", ``, `Error: TestTools.get() missing 1 required positional argument: 'id'`, true},
		{"get", `{"id": "a", "x": 1}`, `Error: TestTools.get() got an unexpected keyword argument 'x'`, true},
		{"add", `{}`, `Error: TestTools.add() missing 2 required positional arguments: 'id' and 'n'`, true},
		{"get", `{"id": "a"`, `Error: Invalid JSON in tool call arguments: Expecting ',' delimiter: line 1 column 11 (char 10)`, true},
		{"get", `[1]`, `Error: argument after ** must be a mapping, not list`, true},
		{"nope", `{bad`, `Error: Tool 'nope' not found.`, true},
		{"nope", `{}`, `Error: Tool 'nope' not found.`, true},
		{"add", `{"id": "a", "n": 2}`, `"3"`, false}, // a top-level int becomes str(x), then json.dumps
		{"add", `{"id": "a", "n": 2.0}`, `"5"`, false},
		{"add", `{"id": "a", "n": 2.5}`, `Error: add: argument 'n' must be int, not float`, true},
		{"stats", ``, `{"n": "1", "ok": "True", "avg": "2.0", "items": ["a"], "none": null}`, false},
		{"emoji", ``, `📶 ok ✈️`, false},
		{"boom", ``, `Error: internal error in boom: runtime error: invalid memory address or nil pointer dereference`, true},
	} {
		e := newTestEnv(t)
		if c.name == "add" && strings.Contains(c.args, "2.0") {
			e.Call(Assistant, "add", `{"id": "a", "n": 2}`)
		}
		got, isErr := e.Call(Assistant, c.name, c.args)
		if got != c.want || isErr != c.isErr {
			t.Errorf("Call(%s, %s) = (%q, %v), want (%q, %v)", c.name, c.args, got, isErr, c.want, c.isErr)
		}
	}
}

func TestPanicIsPanicError(t *testing.T) {
	e := newTestEnv(t)
	_, err := e.MakeToolCall(Assistant, "boom", nil)
	var pe *PanicError
	if !errors.As(err, &pe) || len(pe.Stack) == 0 {
		t.Fatalf("err %v is not a PanicError with a stack", err)
	}
}

func TestErrorKeepsEarlierMutation(t *testing.T) {
	e := newTestEnv(t)
	if out, isErr := e.Call(Assistant, "add", `{"id": "a", "n": 200}`); !isErr || out != "Error: too many" {
		t.Fatalf("got %q %v", out, isErr)
	}
	if out, _ := e.Call(Assistant, "get", `{"id": "a"}`); !strings.Contains(out, `"count": 201`) {
		t.Fatalf("mutation before the error was lost: %s", out)
	}
}

func TestRequestors(t *testing.T) {
	e := newTestEnv(t)
	if out, isErr := e.Call(User, "get", `{"id": "a"}`); !isErr || out != "Error: User tools not available" {
		t.Fatalf("user call: %q %v", out, isErr)
	}
	if out, isErr := e.Call("robot", "get", `{"id": "a"}`); !isErr || out != "Error: Invalid requestor: robot" {
		t.Fatalf("bad requestor: %q %v", out, isErr)
	}
	// Solo: assistant calls to user tools go to the user toolkit.
	e.User = Side{Toolkit: MustToolkit("UserTools", []*Tool{NewTool("emoji2", Read, schema("emoji2"), func(db *testDB, a *Args) (any, error) { return "u", nil })}), DB: e.Agent.DB}
	if err := e.EnableSolo(); err != nil {
		t.Fatal(err)
	}
	if out, isErr := e.Call(Assistant, "emoji2", ``); isErr || out != "u" {
		t.Fatalf("solo: %q %v", out, isErr)
	}
	if _, isErr := e.Call(User, "emoji2", ``); !isErr {
		t.Fatal("user call allowed in solo mode")
	}
	if len(e.Tools()) != len(testToolkit.Tools())+1 {
		t.Fatal("solo tools")
	}
}

func TestEnvFunctionsAndAssertions(t *testing.T) {
	e := newTestEnv(t)
	var syncs atomic.Int32
	e.SyncHook = func(*Environment) error { syncs.Add(1); return nil }
	if _, err := e.RunEnvFunction(Assistant, "add", pyjson.NewObject("id", "b", "n", int64(3))); err != nil {
		t.Fatal(err) // tools are env functions too
	}
	ok, err := e.RunAssertion(Assistant, "assert_count", pyjson.NewObject("id", "b", "n", int64(3)), true)
	if err != nil || !ok {
		t.Fatalf("assert_count: %v %v", ok, err)
	}
	ok, err = e.RunAssertion(Assistant, "assert_count", pyjson.NewObject("id", "b", "n", int64(3)), false)
	if err != nil || ok {
		t.Fatalf("assert_count false: %v %v", ok, err)
	}
	if _, err := e.RunAssertion(Assistant, "not_bool", nil, true); err == nil || err.Error() != "Function not_bool returned <class 'str'> instead of bool" {
		t.Fatalf("not_bool: %v", err)
	}
	if _, err := e.RunEnvFunction(Assistant, "missing", nil); err == nil || err.Error() != "'TestTools' object has no attribute 'missing'" {
		t.Fatalf("missing: %v", err)
	}
	if _, err := e.RunEnvFunction("moon", "add", nil); err == nil {
		t.Fatal("bad env type accepted")
	}
	if syncs.Load() != 4 {
		t.Fatalf("sync ran %d times, want 4 (after each env function that returned)", syncs.Load())
	}
}

func TestForkAndSameState(t *testing.T) {
	a := newTestEnv(t)
	b := a.Fork()
	if same, err := SameState(a, b); err != nil || !same {
		t.Fatalf("fresh fork differs: %v %v", same, err)
	}
	a.Call(Assistant, "add", `{"id": "a", "n": 1}`)
	if same, _ := SameState(a, b); same {
		t.Fatal("SameState missed a change")
	}
	b.Call(Assistant, "add", `{"id": "a", "n": 1}`)
	ha, _, _ := a.Hashes()
	hb, _, _ := b.Hashes()
	if same, _ := SameState(a, b); !same || ha != hb {
		t.Fatalf("same changes: SameState=%v hashes %s %s", same, ha, hb)
	}
}

func TestApplyInitializationData(t *testing.T) {
	e := newTestEnv(t)
	upd, _ := pyjson.LoadsObject(`{"items": {"a": {"count": 7}, "c": {"id": "c", "count": 0, "price": 1, "note": "n"}}}`)
	if err := e.ApplyInitializationData(upd, nil); err != nil {
		t.Fatal(err)
	}
	out, _ := e.Call(Assistant, "get", `{"id": "a"}`)
	if out != `{"id": "a", "count": 7, "price": 2.5, "note": null}` {
		t.Fatalf("merged record: %s", out)
	}
	if out, _ := e.Call(Assistant, "get", `{"id": "c"}`); out != `{"id": "c", "count": 0, "price": 1.0, "note": "n"}` {
		t.Fatalf("new record: %s", out)
	}
	bad, _ := pyjson.LoadsObject(`{"items": {"a": {"count": "x"}}}`)
	if err := e.ApplyInitializationData(bad, nil); err == nil {
		t.Fatal("invalid update accepted")
	}
	// τ²'s aliasing: after agent_data the user side points at the agent DB.
	e.User = Side{Toolkit: testToolkit, DB: &testDB{}}
	if err := e.ApplyInitializationData(pyjson.NewObject(), nil); err != nil {
		t.Fatal(err)
	}
	if e.User.DB != e.Agent.DB {
		t.Fatal("user DB not aliased to the agent DB")
	}
}

func TestToJSONStr(t *testing.T) {
	s := "x"
	for _, c := range []struct {
		v    any
		want string
	}{
		{"raw ✈ \"string\"", "raw ✈ \"string\""},
		{int64(3), `"3"`},
		{4.0, `"4.0"`},
		{true, `"True"`},
		{nil, `null`},
		{[]any{int64(1), "a", 1.5}, `["1", "a", "1.5"]`},
		{&item{ID: "é", Count: 2, Price: 3, Note: &s}, `{"id": "\u00e9", "count": 2, "price": 3.0, "note": "x"}`},
		{[]*item{{ID: "a"}}, `[{"id": "a", "count": 0, "price": 0.0, "note": null}]`},
		{[][]*item{{{ID: "a"}}}, `[[{"id": "a", "count": 0, "price": 0.0, "note": null}]]`},
		{pyjson.NewObject("m", &item{ID: "a"}, "n", int64(1)), `{"m": {"id": "a", "count": 0, "price": 0.0, "note": null}, "n": "1"}`},
	} {
		got, err := ToJSONStr(c.v)
		if err != nil || got != c.want {
			t.Errorf("ToJSONStr(%#v) = %q, %v; want %q", c.v, got, err, c.want)
		}
	}
}

func TestRegistry(t *testing.T) {
	Register("test-domain", func(o Options) (*Environment, error) { return &Environment{Domain: "test-domain"}, nil })
	t.Cleanup(func() { // so that -count=N registers it afresh
		regMu.Lock()
		delete(registry, "test-domain")
		regMu.Unlock()
	})
	e, err := New("test-domain", Options{})
	if err != nil || e.Domain != "test-domain" {
		t.Fatal(e, err)
	}
	if _, err := New("no-such-domain", Options{}); err == nil {
		t.Fatal("unknown domain built")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("double registration did not panic")
		}
	}()
	Register("test-domain", nil)
}

// loadOnceRuns gives each run of TestLoadOnce its own cache key: LoadOnce caches per process, so
// a fixed key would be loaded already when go test -count=N runs the test again.
var loadOnceRuns atomic.Int32

func TestLoadOnce(t *testing.T) {
	key := fmt.Sprintf("test-load-once-%d", loadOnceRuns.Add(1))
	var calls atomic.Int32
	load := func() (int, error) {
		if calls.Add(1) == 1 {
			return 0, errors.New("transient")
		}
		return 42, nil
	}
	if _, err := LoadOnce(key, load); err == nil {
		t.Fatal("error not returned")
	}
	for range 3 {
		if v, err := LoadOnce(key, load); err != nil || v != 42 {
			t.Fatal(v, err)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("load ran %d times, want 2 (failure not cached, success cached)", calls.Load())
	}
}

func TestBindArgsMessages(t *testing.T) {
	ps := []Param{{"a", true}, {"b", true}, {"c", true}, {"d", false}}
	err := bindArgs("K", "f", ps, &pyjson.Object{})
	if err == nil || err.Error() != "K.f() missing 3 required positional arguments: 'a', 'b', and 'c'" {
		t.Fatal(err)
	}
}

// FuzzCall: no arguments string makes Call panic, and errors are flagged.
func FuzzCall(f *testing.F) {
	for _, s := range []string{`{"id": "a"}`, `{"id": "a", "n": 1e400}`, `{"id": null, "n": [1]}`, `"x"`, ``, `{"n": -9223372036854775808, "id": "a"}`, `{"id": "a", "n": 123456789012345678901234567890}`} {
		f.Add("add", s)
		f.Add("get", s)
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		var db testDB
		db.Items = pyjson.NewTable(pyjson.NewMap[*item](0))
		e := &Environment{Agent: Side{Toolkit: testToolkit, DB: &db}}
		out, isErr := e.Call(Assistant, name, args)
		if isErr != strings.HasPrefix(out, "Error: ") && name != "emoji" {
			t.Fatalf("flag/content mismatch: %q %v", out, isErr)
		}
	})
}
