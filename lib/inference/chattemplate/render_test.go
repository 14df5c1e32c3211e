package chattemplate

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"testing"
	"time"

	"tau2rl/lib/inference/tokenizer/hforacle"
)

var update = flag.Bool("update", false, "regenerate golden files from the npm oracle (needs node and npm ci)")

type oracleOut struct {
	Text  string `json:"text"`
	Error string `json:"error"`
}

func runTemplateOracle(t *testing.T, cases []renderCase) []oracleOut {
	t.Helper()
	if err := hforacle.Available(); err != nil {
		if os.Getenv("TAU2RL_REQUIRE_ORACLE") != "" {
			t.Fatal(err)
		}
		t.Skipf("npm oracle unavailable (%v); install with: %s", err, hforacle.InstallHint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out []oracleOut
	cfg := filepath.Join(tokenizertest.Dir(t), "tokenizer_config.json")
	if err := hforacle.Run(ctx, "template", cfg, cases, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(cases) {
		t.Fatalf("oracle returned %d results for %d cases", len(out), len(cases))
	}
	return out
}

func goldenRenderInputs() []renderCase {
	return append(handRenderCases(), randomRenderCases(7, 120)...)
}

func TestRenderGolden(t *testing.T) {
	path := filepath.Join("testdata", "golden_render.json")
	if *update {
		cases := goldenRenderInputs()
		out := runTemplateOracle(t, cases)
		for i := range cases {
			if out[i].Error != "" {
				t.Fatalf("%s: oracle error %s", cases[i].Name, out[i].Error)
			}
			cases[i].Text = out[i].Text
		}
		b, err := json.MarshalIndent(cases, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with go test ./lib/inference/chattemplate -run TestRenderGolden -update)", err)
	}
	var cases []renderCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 100 {
		t.Fatalf("golden file has only %d cases", len(cases))
	}
	for _, c := range cases {
		checkRender(t, c, c.Text)
	}
}

func checkRender(t *testing.T, c renderCase, want string) {
	t.Helper()
	got, err := Render(c.Messages, Options{Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt, EnableThinking: c.EnableThinking})
	if err != nil {
		t.Errorf("%s: %v", c.Name, err)
		return
	}
	if got != want {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Errorf("%s: differs at byte %d:\n got …%q\nwant …%q", c.Name, i, tail(got[i:]), tail(want[i:]))
	}
}

func tail(s string) string {
	if len(s) > 120 {
		return s[:120]
	}
	return s
}

// TestRenderOracleLive renders the real τ² tool schemas and system prompts
// (when the shared data is present) and more random conversations, and
// compares with the Jinja template run by @huggingface/jinja.
func TestRenderOracleLive(t *testing.T) {
	cases := randomRenderCases(11, 300)
	for _, domainTools := range tau2Tools(t) {
		cases = append(cases, renderCase{
			Name: "tau2 tools", Tools: domainTools, AddGenerationPrompt: true,
			Messages: []Message{{Role: RoleSystem, Content: "policy"}, {Role: RoleAssistant, Content: "Hi! How can I help you today?"}, {Role: RoleUser, Content: "hello"}},
		})
	}
	out := runTemplateOracle(t, cases)
	for i, c := range cases {
		if out[i].Error != "" {
			t.Errorf("%s: oracle error %s", c.Name, out[i].Error)
			continue
		}
		checkRender(t, c, out[i].Text)
	}
	t.Logf("%d conversations equal to the Jinja template", len(cases))
}

// TestRenderPythonOracle compares with Python's Jinja2 set up as
// transformers sets it up (the implementation SGLang, vLLM and AReaL use), on
// the golden cases and the live corpus.
func TestRenderPythonOracle(t *testing.T) {
	if err := hforacle.PythonAvailable(); err != nil {
		if os.Getenv("TAU2RL_REQUIRE_ORACLE") != "" {
			t.Fatal(err)
		}
		t.Skipf("Python template oracle unavailable: %v", err)
	}
	cases := append(goldenRenderInputs(), randomRenderCases(11, 300)...)
	for _, domainTools := range tau2Tools(t) {
		cases = append(cases, renderCase{Name: "tau2 tools", Tools: domainTools, AddGenerationPrompt: true,
			Messages: []Message{{Role: RoleSystem, Content: "policy"}, {Role: RoleUser, Content: "hello"}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out []oracleOut
	if err := hforacle.RunPythonTemplate(ctx, filepath.Join(tokenizertest.Dir(t), "tokenizer_config.json"), cases, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(cases) {
		t.Fatalf("oracle returned %d results for %d cases", len(out), len(cases))
	}
	for i, c := range cases {
		if out[i].Error != "" {
			t.Errorf("%s: oracle error %s", c.Name, out[i].Error)
			continue
		}
		checkRender(t, c, out[i].Text)
	}
	t.Logf("%d conversations equal to Python Jinja2", len(cases))
}

// tau2Tools reads derived/tool_schemas.json from the shared τ² data: per
// domain, the agent's tools in τ²'s openai_schema form.
func tau2Tools(t *testing.T) [][]json.RawMessage {
	dir := os.Getenv("TAU2_DATA_DIR")
	if dir == "" {
		wd, _ := os.Getwd()
		for d := wd; filepath.Dir(d) != d; d = filepath.Dir(d) {
			if st, err := os.Stat(filepath.Join(d, "..", "shared", "tau2-data")); err == nil && st.IsDir() {
				dir = filepath.Join(d, "..", "shared", "tau2-data")
				break
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "derived", "tool_schemas.json"))
	if dir == "" || err != nil {
		t.Logf("τ² tool schemas not available (%v); skipping them", err)
		return nil
	}
	var schemas map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &schemas); err != nil {
		t.Fatal(err)
	}
	var out [][]json.RawMessage
	for _, d := range schemas {
		for key, raw := range d {
			if !strings.HasSuffix(key, "tools") {
				continue
			}
			var tools []json.RawMessage
			if err := json.Unmarshal(raw, &tools); err == nil && len(tools) > 0 {
				out = append(out, tools)
			}
		}
	}
	return out
}

func TestRenderErrors(t *testing.T) {
	for name, c := range map[string]struct {
		msgs []Message
		opts Options
	}{
		"empty":          {nil, Options{}},
		"unknown role":   {[]Message{{Role: "developer", Content: "x"}}, Options{}},
		"bad tool json":  {[]Message{{Role: RoleUser, Content: "x"}}, Options{Tools: []json.RawMessage{json.RawMessage(`{"a":`)}}},
		"bad args":       {[]Message{{Role: RoleAssistant, ToolCalls: []ToolCall{call("", "f", `{`)}}}, Options{}},
		"missing args":   {[]Message{{Role: RoleAssistant, ToolCalls: []ToolCall{call("", "f", ``)}}}, Options{}},
		"trailing args":  {[]Message{{Role: RoleAssistant, ToolCalls: []ToolCall{call("", "f", `{} {}`)}}}, Options{}},
		"bad string arg": {[]Message{{Role: RoleAssistant, ToolCalls: []ToolCall{call("", "f", `"abc`)}}}, Options{}},
	} {
		if _, err := Render(c.msgs, c.opts); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
	if _, err := Tool("x", "y", json.RawMessage(`{`)); err == nil {
		t.Error("Tool with invalid parameters: want error")
	}
}

// TestToJSONPython pins the Python-specific cases (values computed with
// CPython 3.11 json.dumps(json.loads(x), ensure_ascii=False)); JavaScript
// differs on these, so they are not in the npm-oracle corpus.
func TestToJSONPython(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`1.0`, `1.0`},
		{`1e2`, `100.0`},
		{`1E-5`, `1e-05`},
		{`0.0001`, `0.0001`},
		{`1e16`, `1e+16`},
		{`1e15`, `1000000000000000.0`},
		{`123456789012345678.0`, `1.2345678901234568e+17`},
		{`-2.5e-7`, `-2.5e-07`},
		{`5e-324`, `5e-324`},
		{`1e999`, `Infinity`},
		{`-1e999`, `-Infinity`},
		{`-0`, `0`},
		{`-0.0`, `-0.0`},
		{`123456789012345678901234567890`, `123456789012345678901234567890`},
		{`{"1": 1, "b": 2, "0": 3}`, `{"1": 1, "b": 2, "0": 3}`},
		{`{"a":1,"a":2,"b":{}}`, `{"a": 2, "b": {}}`},
		{`"\u00e9\u2028\ud83d\ude00\u001f\u007f</"`, "\"é\u2028😀\\u001f\u007f</\""},
		{`"\b\f\n\r\t\/"`, `"\b\f\n\r\t/"`},
		{` [ ] `, `[]`},
	} {
		got, err := ToJSON([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("ToJSON(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{``, `{`, `[1,]`, `{"a" 1}`, `1 2`, `nul`} {
		if _, err := ToJSON([]byte(bad)); err == nil {
			t.Errorf("ToJSON(%q): want error", bad)
		}
	}
}

func FuzzToJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5, "x"]}`, `"é\n"`, `1e-7`, `{"b":1,"b":2}`, `[[[]]]`, `-0.0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := ToJSON(raw)
		if err != nil {
			return
		}
		if !json.Valid([]byte(strings.NewReplacer("Infinity", "0", "NaN", "0").Replace(out))) {
			t.Fatalf("ToJSON(%q) = %q is not JSON", raw, out)
		}
		again, err := ToJSON([]byte(out))
		if err != nil && !strings.Contains(out, "Infinity") {
			t.Fatalf("ToJSON(ToJSON(%q)) failed: %v", raw, err)
		}
		if err == nil && again != out {
			t.Fatalf("not idempotent: %q → %q → %q", raw, out, again)
		}
	})
}

func BenchmarkRender(b *testing.B) {
	cases := handRenderCases()
	c := cases[7] // full episode with tools
	for b.Loop() {
		if _, err := Render(c.Messages, Options{Tools: c.Tools, AddGenerationPrompt: true}); err != nil {
			b.Fatal(err)
		}
	}
}
