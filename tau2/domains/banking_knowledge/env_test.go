package banking_knowledge

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/knowledge"
	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

func toolNames(e *env.Environment) []string {
	var n []string
	for _, t := range e.Tools() {
		n = append(n, t.Name)
	}
	return n
}

var baseNames = "transfer_to_human_agents get_current_time get_user_information_by_id get_user_information_by_name get_user_information_by_email change_user_email get_referrals_by_user get_credit_card_transactions_by_user get_credit_card_accounts_by_user log_verification give_discoverable_user_tool unlock_discoverable_agent_tool call_discoverable_agent_tool list_discoverable_agent_tools"

// TestRetrievalConfigs checks, per configuration, the agent's tools in
// upstream's order (the retrieval MixIn tools first, as ToolKitType's MRO
// merge puts them) and the policy's template substitutions.
func TestRetrievalConfigs(t *testing.T) {
	dir := tau2test.DataDir(t)
	for _, c := range []struct {
		name, tools string
		policyHas   string
	}{
		{"no_knowledge", baseNames, ""},
		{"full_kb", baseNames, "## Internal: Opening Personal Checking Accounts\n\n## Eligibility Requirements"},
		{"golden_retrieval", baseNames, "(No documents provided)"},
		{"grep_only", "grep " + baseNames, ""},
		{"bm25", "KB_search " + baseNames, ""},
		{"bm25_grep", "KB_search grep " + baseNames, ""},
		{"", "KB_search " + baseNames, ""}, // DefaultRetrieval
	} {
		e, err := New(env.Options{DataDir: dir, Retrieval: c.name})
		if err != nil {
			t.Fatalf("%q: %v", c.name, err)
		}
		if got := strings.Join(toolNames(e), " "); got != c.tools {
			t.Errorf("%q tools:\n got %s\nwant %s", c.name, got, c.tools)
		}
		if strings.Contains(e.Policy, "{{") {
			i := strings.Index(e.Policy, "{{")
			t.Errorf("%q: unsubstituted template field %q", c.name, e.Policy[i:min(i+40, len(e.Policy))])
		}
		if c.policyHas != "" && !strings.Contains(e.Policy, c.policyHas) {
			t.Errorf("%q: policy lacks %q", c.name, c.policyHas)
		}
		if got := strings.Join(e.User.Toolkit.Names(), " "); got != "apply_for_credit_card submit_referral call_discoverable_user_tool list_discoverable_user_tools request_human_agent_transfer submit_transaction" {
			t.Errorf("%q user tools: %s", c.name, got)
		}
	}
	for _, bad := range []string{"terminal_use_write", "alltools", "nope"} {
		if _, err := New(env.Options{DataDir: dir, Retrieval: bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := New(env.Options{DataDir: dir, Solo: true}); err == nil {
		t.Error("solo mode accepted")
	}
}

// TestGoldenRetrievalPolicy: golden_retrieval inlines the task's required
// documents (by title, else id) for {{required_documents}}.
func TestGoldenRetrievalPolicy(t *testing.T) {
	dir := tau2test.DataDir(t)
	tasks, err := data.LoadTasks(dir, Domain, data.Head)
	if err != nil {
		t.Fatal(err)
	}
	task := tasks[0]
	if len(task.RequiredDocuments) == 0 {
		t.Fatal("task has no required documents")
	}
	e, err := New(env.Options{DataDir: dir, Retrieval: "golden_retrieval"})
	if err != nil {
		t.Fatal(err)
	}
	if err := evaluator.InitializeEnv(e, task); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(e.Policy, "(No documents provided)") || strings.Contains(e.Policy, "{{required_documents}}") {
		t.Fatal("required documents not inlined")
	}
	b, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range task.RequiredDocuments {
		d, ok := b.kb.Get(ref)
		if !ok {
			t.Fatalf("required document %q is not an id", ref)
		}
		if !strings.Contains(e.Policy, "## "+d.Title+"\n\n"+d.Content) {
			t.Errorf("policy lacks required document %q", ref)
		}
	}
}

var timingRE = regexp.MustCompile(`\n\n\[Timing: retrieval=\d+ms(, reranking=\d+ms)?, total=\d+ms\]$`)

// TestKBSearchAndGrepOutput checks the tools' text: upstream's listing
// (rank, title, id, score to 4 places, content), BM25's top document and
// score for a query, the timing line, and grep's listing.
func TestKBSearchAndGrepOutput(t *testing.T) {
	dir := tau2test.DataDir(t)
	e, err := New(env.Options{DataDir: dir, Retrieval: "bm25_grep"})
	if err != nil {
		t.Fatal(err)
	}
	out, isErr := e.Call(env.Assistant, "KB_search", `{"query": "how do I dispute a credit card transaction"}`)
	if isErr {
		t.Fatal(out)
	}
	if !timingRE.MatchString(out) {
		t.Errorf("no timing line: %q", out[max(0, len(out)-80):])
	}
	// first hit: see tau2/knowledge/testdata/bm25_golden.json
	if !strings.HasPrefix(out, "1. ") || !strings.Contains(out, "\n   ID: doc_bank_accounts_bank_accounts_(general)_035\n   Score: 15.4184\n   Content: ") {
		t.Errorf("unexpected first hit: %q", out[:min(300, len(out))])
	}
	if n := strings.Count(out, "\n   Score: "); n != 10 {
		t.Errorf("%d hits, want 10", n)
	}
	out, _ = e.Call(env.Assistant, "KB_search", `{"query": "   "}`)
	if !strings.HasPrefix(out, "No relevant documents found.\n\n[Timing: ") {
		t.Errorf("blank query: %q", out)
	}
	out, _ = e.Call(env.Assistant, "grep", `{"pattern": "zzqqxx_nothing"}`)
	if out != "No matches found for pattern: zzqqxx_nothing" {
		t.Errorf("grep miss: %q", out)
	}
	out, _ = e.Call(env.Assistant, "grep", `{"pattern": "provisional credit"}`)
	if !strings.HasPrefix(out, "1. ") || !strings.Contains(out, "   Score: ") {
		t.Errorf("grep hit: %q", out[:min(200, len(out))])
	}
	if _, isErr := e.Call(env.Assistant, "KB_search", `{"query": 5}`); !isErr {
		t.Error("non-str query accepted")
	}
}

// TestEnvironmentsAreIndependent: a mutation in one environment is not
// seen by another (the per-episode DB and unlocked-tool state are forks).
func TestEnvironmentsAreIndependent(t *testing.T) {
	dir := tau2test.DataDir(t)
	a, err := New(env.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New(env.Options{DataDir: dir})
	a.Call(env.Assistant, "unlock_discoverable_agent_tool", `{"agent_tool_name": "freeze_debit_card_3892"}`)
	out, _ := a.Call(env.Assistant, "call_discoverable_agent_tool", `{"agent_tool_name": "freeze_debit_card_3892", "arguments": "{\"card_id\": \"dbc_538bfb9cba\"}"}`)
	if !strings.HasPrefix(out, "Debit Card Frozen Successfully") {
		t.Fatal(out)
	}
	out, _ = b.Call(env.Assistant, "call_discoverable_agent_tool", `{"agent_tool_name": "freeze_debit_card_3892", "arguments": "{\"card_id\": \"dbc_538bfb9cba\"}"}`)
	if !strings.Contains(out, "has not been unlocked") {
		t.Errorf("unlock leaked: %q", out)
	}
	ha, _, _ := a.Hashes()
	hb, _, _ := b.Hashes()
	if ha == hb {
		t.Error("mutation leaked or not applied")
	}
	c := a.Fork()
	out, _ = c.Call(env.Assistant, "call_discoverable_agent_tool", `{"agent_tool_name": "freeze_debit_card_3892", "arguments": "{\"card_id\": \"dbc_538bfb9cba\"}"}`)
	if !strings.Contains(out, "already frozen") {
		t.Errorf("fork lost state: %q", out)
	}
}

func TestDumpsIndent2(t *testing.T) {
	v, _ := pyjson.Loads(`{"a": 1.0, "b": [1, {"c": null}], "d": {}, "e": [], "f": "é\""}`)
	want := "{\n  \"a\": 1.0,\n  \"b\": [\n    1,\n    {\n      \"c\": null\n    }\n  ],\n  \"d\": {},\n  \"e\": [],\n  \"f\": \"\\u00e9\\\"\"\n}"
	if got := dumpsIndent2(v); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestPyTitleAndFormats(t *testing.T) {
	for in, want := range map[string]string{"fraud suspected": "Fraud Suspected", "o'neil x2y": "O'Neil X2Y", "ÉCOLE b": "École B"} {
		if got := pyTitle(in); got != want {
			t.Errorf("pyTitle(%q) = %q, want %q", in, got, want)
		}
	}
	if got := fmtIntComma(1234567); got != "1,234,567" {
		t.Error(got)
	}
	if got := pyRound(0.30000000000000027, 4); floatRepr(got) != "0.3" {
		t.Error(got)
	}
	if _, err := pyFloat("1__0"); err == nil {
		t.Error("1__0 parsed")
	}
	if f, err := pyFloat(" 1_000.5 "); err != nil || f != 1000.5 {
		t.Error(f, err)
	}
	var te *pyTypeError
	if _, err := pyFloat(nil); !errors.As(err, &te) {
		t.Error("float(None) is a TypeError")
	}
	_ = knowledge.Tokenize
}

// TestAnySplitIsAllTasks: the domain has no split_tasks.json; as upstream's
// get_tasks, every split name selects all 97 tasks.
func TestAnySplitIsAllTasks(t *testing.T) {
	dir := tau2test.DataDir(t)
	for _, split := range []string{"", "base", "test"} {
		tasks, err := data.LoadSplit(dir, Domain, data.Head, split)
		if err != nil || len(tasks) != 97 {
			t.Errorf("split %q: %d tasks, %v", split, len(tasks), err)
		}
	}
}

// TestTerminalUse: the terminal_use configuration's shell tool (first in
// the tool list) over the exported knowledge base, with upstream's result
// texts for no grep match, errors and empty output.
func TestTerminalUse(t *testing.T) {
	dir := tau2test.DataDir(t)
	e, err := New(env.Options{DataDir: dir, Retrieval: "terminal_use"})
	if errors.Is(err, knowledge.ErrSandboxRefused) {
		t.Skip(err) // installed, but this host refuses the namespaces: nothing to install
	}
	if errors.Is(err, knowledge.ErrSandboxUnavailable) {
		if os.Getenv("TAU2RL_REQUIRE_TOOLS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toolNames(e), " "); got != "shell "+baseNames {
		t.Errorf("tools: %s", got)
	}
	if !strings.Contains(e.Policy, "`shell`") || strings.Contains(e.Policy, "{{") {
		t.Error("policy: shell instructions missing or a template field left unsubstituted")
	}
	for _, c := range []struct{ cmd, want string }{
		{"ls | wc -l", "699\n"},
		{"head -n 1 doc_bank_accounts_bank_accounts__general__001.md", "# Internal: Opening Personal Checking Accounts\n"},
		{"grep -l zzqqxx_nothing *.md", "No matches found."},
		{"cat nope.md", "Error (exit code 1): cat: nope.md: No such file or directory\n"},
		{"true", "(no output)"},
		{"false", "Command failed with exit code 1"},
		{"cat ../x", "Error (exit code 1): Error: Command blocked - contains '..' which could escape the sandbox"},
	} {
		out, _ := e.Call(env.Assistant, "shell", pyjson.MustDumps(pyjson.NewObject("command", c.cmd)))
		if out != c.want {
			t.Errorf("%q: %q, want %q", c.cmd, out, c.want)
		}
	}
}
