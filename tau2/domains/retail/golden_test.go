package retail

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

// The golden files in testdata/golden were produced by testdata/oracle
// (setup.sh + harness.py), which runs testdata/scenarios.json through
// τ²-bench's own RetailTools (a2c0247, pydantic 2.13) with τ²'s
// get_response and to_json_str: every tool message (content and error
// flag) and each scenario's final DB hash must match byte for byte.

type scenario struct {
	Name  string      `json:"name"`
	DB    string      `json:"db"` // "fixture" or "real"
	Calls [][2]string `json:"calls"`
	// AgentData is applied first, like a task's
	// initial_state.initialization_data.agent_data.
	AgentData json.RawMessage `json:"agent_data"`
}

func readScenarios(t *testing.T) []scenario {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []scenario
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("scenarios.json: %v", err)
	}
	return out
}

// realBase loads the real retail DB or skips.
func realBase(t testing.TB) (string, *Base) { return tau2test.RealBase(t, LoadBase) }

func TestGoldenScenarios(t *testing.T) {
	golden := tau2test.ReadGoldens(t, filepath.Join("testdata", "golden", "scenarios.jsonl"))
	fixture := tau2test.Fixture(t, ParseDB)
	scenarios := readScenarios(t)
	if len(scenarios) != len(golden) {
		t.Fatalf("%d scenarios, %d goldens: run testdata/oracle/setup.sh", len(scenarios), len(golden))
	}
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			g, ok := golden[sc.Name]
			if !ok || len(g.Results) != len(sc.Calls) {
				t.Fatalf("golden for %s missing or stale; run testdata/oracle/setup.sh", sc.Name)
			}
			db := fixture
			if sc.DB == "real" {
				_, b := realBase(t)
				db = b.DB
			}
			e := NewEnvironment(db, "")
			if len(sc.AgentData) > 0 {
				update, err := pyjson.LoadsObject(string(sc.AgentData))
				if err != nil {
					t.Fatal(err)
				}
				if err := e.ApplyInitializationData(update, nil); err != nil {
					t.Fatal(err)
				}
			}
			tau2test.CheckCalls(t, e, sc.Calls, g)
			// The episode's changes never leak into the shared base.
			if h0, _, _ := NewEnvironment(db, "").Hashes(); sc.DB == "real" && h0 != realPristineHash {
				t.Errorf("base DB modified: hash %s", h0)
			}
		})
	}
}

// realPristineHash is τ²'s get_db_hash of the unmodified retail db.json
// (RetailDB.load(db.json).get_hash(), also in golden/gold_replay.json).
const realPristineHash = "b25c9cb211f5efcaee5dd646054a73c4a9f43f4f5acc32c10713cd9f9ac20e9c"

func TestRealDBHash(t *testing.T) {
	_, b := realBase(t)
	h, err := env.DBHash(b.DB)
	if err != nil {
		t.Fatal(err)
	}
	if h != realPristineHash {
		t.Fatalf("hash %s, want %s", h, realPristineHash)
	}
	s := b.DB
	if s.Products.Len() != 50 || s.Users.Len() != 500 || s.Orders.Len() != 1000 {
		t.Errorf("counts: %d products, %d users, %d orders", s.Products.Len(), s.Users.Len(), s.Orders.Len())
	}
}

// TestToolSchemasMatchTau2 checks the schemas sent to the LLM against τ²'s
// derived/tool_schemas.json, byte for byte in json.dumps form, with τ²'s
// tool order, types and mutates_state.
func TestToolSchemasMatchTau2(t *testing.T) {
	dir, _ := realBase(t)
	b, err := os.ReadFile(filepath.Join(dir, "derived", "tool_schemas.json"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := pyjson.LoadsObject(string(b))
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := all.Get("retail")
	retail := rv.(*pyjson.Object)
	tv, _ := retail.Get("agent_tools")
	want := tv.([]any)
	typesV, _ := retail.Get("agent_tool_types")
	mutV, _ := retail.Get("agent_tool_mutates_state")
	types, mut := typesV.(*pyjson.Object), mutV.(*pyjson.Object)
	got := Toolkit.Tools()
	if len(got) != len(want) || len(got) != 16 {
		t.Fatalf("%d tools, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if ws := pyjson.MustDumps(w); g.Schema != ws {
			t.Errorf("tool %d: schema\n got %s\nwant %s", i, g.Schema, ws)
		}
		if wt, _ := types.Get(g.Name); string(g.Type) != wt {
			t.Errorf("%s: type %s, want %v", g.Name, g.Type, wt)
		}
		if wm, _ := mut.Get(g.Name); g.Mutates != wm {
			t.Errorf("%s: mutates %v, want %v", g.Name, g.Mutates, wm)
		}
	}
	e, err := env.New(Domain, env.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if e.Agent.Toolkit.SchemasJSON() != pyjson.MustDumps(want) {
		t.Error("SchemasJSON differs from τ²'s tool list")
	}
}

// TestPolicyMatchesTau2 checks the policy against the agent system prompt
// rendered by τ² (derived/agent_system_prompts.json), which embeds it.
func TestPolicyMatchesTau2(t *testing.T) {
	dir, _ := realBase(t)
	b, err := os.ReadFile(filepath.Join(dir, "derived", "agent_system_prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := pyjson.LoadsObject(string(b))
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := prompts.Get(Domain)
	pv, _ := rv.(*pyjson.Object).Get("agent_system_prompt")
	e, err := env.New(Domain, env.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pv.(string), "<policy>\n"+e.Policy+"\n</policy>") {
		t.Error("policy not found verbatim in τ²'s agent system prompt")
	}
	if e.Domain != Domain || e.User.Toolkit != nil || e.SyncHook != nil {
		t.Errorf("environment shape: domain %q, user toolkit %v", e.Domain, e.User.Toolkit)
	}
}

func TestRegistry(t *testing.T) {
	dir, _ := realBase(t)
	if _, err := env.New(Domain, env.Options{DataDir: dir, Solo: true}); err == nil || !strings.Contains(err.Error(), "Retail domain does not support solo mode") {
		t.Errorf("solo mode: %v", err)
	}
	if _, err := env.New(Domain, env.Options{DataDir: t.TempDir()}); err == nil {
		t.Error("empty data directory accepted")
	}
}
