package evaluator

import (
	"math"
	"math/big"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/pyjson"
)

func TestPyEqual(t *testing.T) {
	big1 := new(big.Int).Lsh(big.NewInt(1), 70)
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{`1`, `1.0`, true},
		{`true`, `1`, true},
		{`false`, `0.0`, true},
		{`1`, `"1"`, false},
		{`null`, `null`, true},
		{`null`, `0`, false},
		{`NaN`, `NaN`, false},
		{`[1, 2]`, `[2, 1]`, false},
		{`[1, 2.0]`, `[1.0, 2]`, true},
		{`{"a": 1, "b": [1]}`, `{"b": [1.0], "a": true}`, true},
		{`{"a": 1}`, `{"a": 1, "b": 2}`, false},
		{`9007199254740993`, `9007199254740992.0`, false},
		{`9007199254740992`, `9007199254740992.0`, true},
		{`1180591620717411303424`, `1180591620717411303424`, true},
		{`1180591620717411303424`, `1.1805916207174113e+21`, true},
		{`"é"`, `"\u00e9"`, true},
	} {
		a, err := pyjson.Loads(c.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := pyjson.Loads(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := pyEqual(a, b); got != c.want {
			t.Errorf("pyEqual(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := pyEqual(b, a); got != c.want {
			t.Errorf("pyEqual(%s, %s) = %v, want %v (symmetry)", c.b, c.a, got, c.want)
		}
	}
	if !pyEqual(big1, new(big.Int).Set(big1)) {
		t.Error("big ints")
	}
}

func TestPyStrings(t *testing.T) {
	for _, c := range []struct{ in, lower, strip string }{
		{"  Hello, World \n", "  hello, world \n", "Hello, World"},
		{"ΟΔΟΣ", "οδος", "ΟΔΟΣ"},
		{"ΣΑΣ ΣΑΣ.", "σας σας.", "ΣΑΣ ΣΑΣ."},
		{"İstanbul", "i\u0307stanbul", "İstanbul"},
		{"\x1c\u00a0x\u3000", "\x1c\u00a0x\u3000", "x"},
		{"\u200b", "\u200b", "\u200b"},
	} {
		if got := pyjson.Lower(c.in); got != c.lower {
			t.Errorf("pyjson.Lower(%q) = %q, want %q", c.in, got, c.lower)
		}
		if got := pyjson.Strip(c.in); got != c.strip {
			t.Errorf("pyjson.Strip(%q) = %q, want %q", c.in, got, c.strip)
		}
	}
}

func TestPyReprStr(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abc", `'abc'`},
		{"it's", `"it's"`},
		{`say "it's"`, `'say "it\'s"'`},
		{"a\\b\n\t", `'a\\b\n\t'`},
		{"\x00\x7f", `'\x00\x7f'`},
		{"é😀", `'é😀'`},
		{"\u00a0\u200b\u2028", `'\xa0\u200b\u2028'`},
	} {
		if got := pyReprStr(c.in); got != c.want {
			t.Errorf("pyReprStr(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := pyReprStrList([]string{"a", "b'c"}); got != `['a', "b'c"]` {
		t.Errorf("list repr %s", got)
	}
}

// TestAppendJSON checks pydantic-core's JSON output (values taken from
// pydantic 2.13.4's model_dump_json).
func TestAppendJSON(t *testing.T) {
	floats := []float64{1.0, 0.1, 1e16, 1e15, 1e-5, 1e-4, 1.5e-7, 123456789012345680.0, math.Copysign(0, -1), 100.0, 2.5e300, math.NaN(), 4.0, -2.5}
	l := make([]any, len(floats))
	for i, f := range floats {
		l[i] = f
	}
	v := pyjson.NewObject("x", l, "s", "a\"\\\n\x01\x7f é \u2028 😀", "i", int64(-3), "n", nil, "b", true, "e", []any{}, "o", pyjson.NewObject())
	got, err := AppendJSON(nil, v, JSONStyle{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"x":[1.0,0.1,1e+16,1000000000000000.0,0.00001,0.0001,1.5e-7,1.2345678901234568e+17,-0.0,100.0,2.5e+300,null,4.0,-2.5],"s":"a\"\\\n\u0001` + "\x7f é \u2028 😀" + `","i":-3,"n":null,"b":true,"e":[],"o":{}}`
	if string(got) != want {
		t.Errorf("compact:\n got %s\nwant %s", got, want)
	}
	got, _ = AppendJSON(nil, pyjson.NewObject("x", []any{1.0}, "s", "x", "e", []any{}), JSONStyle{Indent: 2})
	if want := "{\n  \"x\": [\n    1.0\n  ],\n  \"s\": \"x\",\n  \"e\": []\n}"; string(got) != want {
		t.Errorf("indented:\n got %s\nwant %s", got, want)
	}
	got, _ = AppendJSON(nil, pyjson.NewObject("a", []any{int64(1), int64(2)}), JSONStyle{Spaced: true})
	if want := `{"a": [1, 2]}`; string(got) != want {
		t.Errorf("spaced: got %s", got)
	}
}

func TestActionMatches(t *testing.T) {
	obj := func(s string) *pyjson.Object {
		o, err := pyjson.LoadsObject(s)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	act := func(name, args string, cmp []string) *data.Action {
		return &data.Action{ActionID: "a", Requestor: "assistant", Name: name, Arguments: obj(args), CompareArgs: cmp}
	}
	call := func(name, args, req string) *ToolCall {
		return &ToolCall{ID: "c", Name: name, Arguments: obj(args), Requestor: req}
	}
	for _, c := range []struct {
		name string
		a    *data.Action
		c    *ToolCall
		want bool
	}{
		{"same", act("f", `{"x": 1, "y": "a"}`, nil), call("f", `{"y": "a", "x": 1}`, "assistant"), true},
		{"other name", act("f", `{"x": 1}`, nil), call("g", `{"x": 1}`, "assistant"), false},
		{"int equals float", act("f", `{"x": 1}`, nil), call("f", `{"x": 1.0}`, "assistant"), true},
		{"call omits an argument", act("f", `{"x": 1, "y": 2}`, nil), call("f", `{"x": 1}`, "assistant"), true},
		{"call has an extra argument", act("f", `{"x": 1}`, nil), call("f", `{"x": 1, "z": 3}`, "assistant"), false},
		{"no arguments in the call", act("f", `{"x": 1}`, nil), call("f", `{}`, "assistant"), true},
		{"compare_args empty", act("f", `{"x": 1}`, []string{}), call("f", `{"x": 2}`, "user"), true},
		{"compare_args subset", act("f", `{"x": 1, "y": 2}`, []string{"x"}), call("f", `{"x": 1, "y": 9}`, "assistant"), true},
		{"compare_args differs", act("f", `{"x": 1, "y": 2}`, []string{"y"}), call("f", `{"x": 1, "y": 9}`, "assistant"), false},
		{"compare_args key missing in call", act("f", `{"x": 1}`, []string{"x"}), call("f", `{}`, "assistant"), false},
		{"list order matters", act("f", `{"l": [1, 2]}`, nil), call("f", `{"l": [2, 1]}`, "assistant"), false},
		{"requestor ignored", act("f", `{"x": 1}`, nil), call("f", `{"x": 1}`, "user"), true},
		{"undecodable arguments", act("f", `{"x": 1}`, nil), &ToolCall{Name: "f", RawArguments: "{"}, false},
		{"undecodable arguments, compare_args []", act("f", `{"x": 1}`, []string{}), &ToolCall{Name: "f", RawArguments: "{"}, true},
	} {
		if got := ActionMatches(c.a, c.c); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCommunicateCheck(t *testing.T) {
	msgs := []Message{
		{Role: RoleAssistant, Content: Text("Hi! How can I help you today?")},
		{Role: RoleUser, Content: Text("my total is 1628")},
		{Role: RoleAssistant, Content: Text("The refund is $1,628.00 and the id is ABC.")},
		{Role: RoleAssistant, Content: Text("calling"), ToolCalls: []ToolCall{{ID: "1", Name: "f", Arguments: pyjson.NewObject()}}},
		{Role: RoleTool, ID: "1", Content: Text("secret 999")},
		{Role: RoleAssistant, Content: Text("   ")},
	}
	for _, c := range []struct {
		info []string
		want float64
		met  []bool
	}{
		{nil, 1, nil},
		{[]string{"1628"}, 1, []bool{true}},
		{[]string{"abc"}, 1, []bool{true}},
		{[]string{"1,628"}, 0, []bool{false}},
		{[]string{"calling"}, 1, []bool{true}},
		{[]string{"999"}, 0, []bool{false}},
		{[]string{"1628", "xyz"}, 0, []bool{true, false}},
	} {
		p := communicateCheck(&data.EvaluationCriteria{CommunicateInfo: c.info}, msgs)
		if p.reward != c.want {
			t.Errorf("%v: reward %v, want %v", c.info, p.reward, c.want)
		}
		for i, m := range c.met {
			if p.communicateChecks[i].Met != m {
				t.Errorf("%v[%d]: met %v", c.info, i, p.communicateChecks[i].Met)
			}
		}
	}
	p := communicateCheck(&data.EvaluationCriteria{CommunicateInfo: []string{"1628"}}, msgs)
	if want := "Information '1628' communicated in the message:\n 'The refund is $1,628.00 and the id is ABC.'"; p.communicateChecks[0].Justification != want {
		t.Errorf("justification %q", p.communicateChecks[0].Justification)
	}
}

func TestParseJudgeReply(t *testing.T) {
	for _, c := range []struct {
		reply string
		n     int
		met   []bool
		err   bool
	}{
		{`{"results": [{"expectedOutcome": "a", "reasoning": "r", "metExpectation": true}]}`, 1, []bool{true}, false},
		{` {"results": [{"expectedOutcome": "a", "reasoning": "r", "metExpectation": "no"}, {"expectedOutcome": "b", "reasoning": "", "metExpectation": 1}]}`, 2, []bool{false, true}, false},
		{`{"results": []}`, 0, nil, false},
		{`{}`, 0, nil, false},
		{`{"results": {}}`, 0, nil, false},
		{"```json\n{\"results\": []}\n```", 0, nil, true},
		{`[1]`, 0, nil, true},
		{`{"results": null}`, 0, nil, true},
		{`{"results": [{"reasoning": "r", "metExpectation": true}]}`, 0, nil, true},
		{`{"results": [{"expectedOutcome": "a", "reasoning": "r", "metExpectation": "maybe"}]}`, 0, nil, true},
		{`{"results": [{"expectedOutcome": 3, "reasoning": "r", "metExpectation": true}]}`, 0, nil, true},
	} {
		got, err := ParseJudgeReply(c.reply)
		if (err != nil) != c.err {
			t.Errorf("%s: err %v", c.reply, err)
			continue
		}
		if err != nil {
			continue
		}
		if len(got) != c.n {
			t.Errorf("%s: %d checks", c.reply, len(got))
		}
		for i, m := range c.met {
			if got[i].Met != m {
				t.Errorf("%s: [%d] met %v", c.reply, i, got[i].Met)
			}
		}
	}
}

func TestPassHatK(t *testing.T) {
	for _, c := range []struct {
		n, c, k int
		want    float64
	}{
		{4, 4, 1, 1}, {4, 2, 1, 0.5}, {4, 2, 2, 1.0 / 6}, {4, 3, 4, 0}, {4, 0, 1, 0}, {1, 1, 1, 1},
	} {
		if got := PassHatK(c.n, c.c, c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("PassHatK(%d,%d,%d) = %v, want %v", c.n, c.c, c.k, got, c.want)
		}
	}
	f := func(x float64) *float64 { return &x }
	m := ComputeMetrics([]Outcome{
		{"a", "user_stop", f(1)}, {"a", "user_stop", f(0)},
		{"b", "user_stop", f(1)}, {"b", "max_steps", f(1)},
		{"c", "infrastructure_error", f(0)},
		{"d", "user_stop", nil}, {"d", "user_stop", f(1)},
	}, 2)
	if m.MaxK != 2 || m.Tasks != 2 || m.InfraErrors != 1 || m.TasksExcluded != 1 || m.NotEvaluated != 1 {
		t.Fatalf("metrics %+v", m)
	}
	if math.Abs(m.PassHatK[0]-0.75) > 1e-12 || math.Abs(m.PassHatK[1]-0.5) > 1e-12 {
		t.Errorf("pass^k %v, want [0.75 0.5]", m.PassHatK)
	}
	if math.Abs(m.AvgReward-0.8) > 1e-12 {
		t.Errorf("avg reward %v", m.AvgReward)
	}
}
