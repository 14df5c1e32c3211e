package telecom

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

// The golden files in testdata/golden were produced by running
// testdata/scenarios.json through τ²-bench's own TelecomTools and
// TelecomUserTools (tau2-bench a2c0247, pydantic 2.13) with τ²'s
// get_response, run_env_function_call, sync_tools and to_json_str: every
// tool message, env function result and the final DB dumps must match.

func loadJSONFile(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := pyjson.Loads(string(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func get(o any, k string) any {
	v, _ := o.(*pyjson.Object).Get(k)
	return v
}

func fixtureData(t testing.TB) *Data {
	t.Helper()
	d, err := LoadDir(filepath.Join("testdata", "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func realData(t testing.TB) *Data {
	t.Helper()
	d, err := Load(tau2test.DataDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestGoldenScenarios(t *testing.T) {
	scenarios := loadJSONFile(t, filepath.Join("testdata", "scenarios.json")).([]any)
	for _, sc := range scenarios {
		name := get(sc, "name").(string)
		t.Run(name, func(t *testing.T) {
			var d *Data
			if get(sc, "db") == "real" {
				d = realData(t)
			} else {
				d = fixtureData(t)
			}
			golden := loadJSONFile(t, filepath.Join("testdata", "golden", name+".json"))
			e, err := NewEnvironment(d, "policy", DomainManual, false)
			if err != nil {
				t.Fatal(err)
			}
			steps := get(sc, "steps").([]any)
			want := get(golden, "steps").([]any)
			if len(steps) != len(want) {
				t.Fatalf("%d steps, %d golden", len(steps), len(want))
			}
			for i, st := range steps {
				args := get(st, "args").(*pyjson.Object)
				loose := get(st, "loose") == true
				w := want[i]
				label := func() string { return pyjson.MustDumps(st) }
				if get(st, "kind") == "call" {
					content, isErr := e.CallObject(get(st, "requestor").(string), get(st, "name").(string), args)
					wc, we := get(w, "content").(string), get(w, "error").(bool)
					if isErr != we {
						t.Errorf("step %d %s: error=%v want %v (%q vs %q)", i, label(), isErr, we, content, wc)
						continue
					}
					if loose && isErr {
						continue
					}
					if content != wc {
						t.Errorf("step %d %s:\n got %q\nwant %q", i, label(), content, wc)
					}
					continue
				}
				res, err := e.RunEnvFunction(get(st, "env_type").(string), get(st, "name").(string), args)
				if werr, ok := get(w, "error").(string); ok {
					if err == nil {
						t.Errorf("step %d %s: got result %v, want error %q", i, label(), res, werr)
						continue
					}
					if _, msg, _ := strings.Cut(werr, ": "); !loose && err.Error() != msg {
						t.Errorf("step %d %s: error %q, want %q", i, label(), err, msg)
					}
					continue
				}
				if err != nil {
					t.Errorf("step %d %s: error %v", i, label(), err)
					continue
				}
				if got, exp := pyjson.MustDumps(res), pyjson.MustDumps(get(w, "result")); got != exp {
					t.Errorf("step %d %s: result %s, want %s", i, label(), got, exp)
				}
			}
			agent, err := pyjson.DumpsSorted(e.Agent.DB)
			if err != nil {
				t.Fatal(err)
			}
			user, err := pyjson.DumpsSorted(e.User.DB)
			if err != nil {
				t.Fatal(err)
			}
			if agent != get(golden, "agent_db") {
				t.Errorf("agent DB dump differs:\n got %s\nwant %s", agent, get(golden, "agent_db"))
			}
			if user != get(golden, "user_db") {
				t.Errorf("user DB dump differs:\n got %s\nwant %s", user, get(golden, "user_db"))
			}
			ah, uh, err := e.Hashes()
			if err != nil {
				t.Fatal(err)
			}
			if ah != get(golden, "agent_hash") || uh != get(golden, "user_hash") {
				t.Errorf("hashes %s/%s, want %s/%s", ah, uh, get(golden, "agent_hash"), get(golden, "user_hash"))
			}
		})
	}
}

// TestToolSchemasMatchTau2 checks the schemas sent to the LLM against τ²'s
// derived/tool_schemas.json (both policy variants), byte for byte in
// json.dumps form, with τ²'s tool order, types and mutates_state.
func TestToolSchemasMatchTau2(t *testing.T) {
	all := loadJSONFile(t, filepath.Join(tau2test.DataDir(t), "derived", "tool_schemas.json"))
	for _, domain := range []string{DomainManual, DomainWorkflow} {
		want := get(all, domain)
		for _, side := range []struct {
			prefix string
			tk     *env.Toolkit
		}{{"agent", AgentToolkit}, {"user", UserToolkit}} {
			tools := get(want, side.prefix+"_tools").([]any)
			types := get(want, side.prefix+"_tool_types").(*pyjson.Object)
			mut := get(want, side.prefix+"_tool_mutates_state").(*pyjson.Object)
			got := side.tk.Tools()
			if len(got) != len(tools) {
				t.Fatalf("%s %s: %d tools, want %d", domain, side.prefix, len(got), len(tools))
			}
			for i, wt := range tools {
				g := got[i]
				if ws := pyjson.MustDumps(wt); g.Schema != ws {
					t.Errorf("%s %s tool %d: schema\n got %s\nwant %s", domain, side.prefix, i, g.Schema, ws)
				}
				if wtyp, _ := types.Get(g.Name); string(g.Type) != wtyp {
					t.Errorf("%s: type %s, want %v", g.Name, g.Type, wtyp)
				}
				if wm, _ := mut.Get(g.Name); g.Mutates != wm {
					t.Errorf("%s: mutates %v, want %v", g.Name, g.Mutates, wm)
				}
			}
		}
	}
	e, err := env.New(DomainWorkflow, env.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Policy, "<tech_support_policy>") || e.Domain != DomainWorkflow {
		t.Errorf("workflow environment: domain %q policy %.60q", e.Domain, e.Policy)
	}
	wf, _ := data.ReadFile(tau2test.DataDir(t), DomainManual, TechSupportWorkflowFile)
	if !strings.Contains(e.Policy, wf) {
		t.Error("workflow policy text missing")
	}
}

// TestPolicyMatchesTau2 checks the assembled policy text against the agent
// system prompts rendered by τ² (derived/agent_system_prompts.json), which
// embed it verbatim.
func TestPolicyMatchesTau2(t *testing.T) {
	dir := tau2test.DataDir(t)
	prompts := loadJSONFile(t, filepath.Join(dir, "derived", "agent_system_prompts.json"))
	for _, domain := range []string{DomainManual, DomainWorkflow} {
		e, err := env.New(domain, env.Options{})
		if err != nil {
			t.Fatal(err)
		}
		prompt := get(get(prompts, domain), "agent_system_prompt").(string)
		if !strings.Contains(prompt, "<policy>\n"+e.Policy+"\n</policy>") {
			t.Errorf("%s: policy not found verbatim in τ²'s agent system prompt", domain)
		}
	}
	for _, workflow := range []bool{false, true} {
		p, err := Policy(dir, workflow, true)
		if err != nil || !strings.Contains(p, "<main_policy>") {
			t.Errorf("solo policy (workflow=%v): %v", workflow, err)
		}
	}
}
