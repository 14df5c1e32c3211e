package airline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"tau2rl/tau2/env"
	"tau2rl/tau2/tau2test"
)

// The golden files were produced by testdata/gen_golden.py with τ²-bench's
// own AirlineTools (a2c0247) and pydantic; every tool message (content and
// error flag) and the final DB hash must match byte for byte.

type scenario struct {
	Name  string      `json:"name"`
	Calls [][2]string `json:"calls"`
}

func readScenarios(t testing.TB, name string) []scenario {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []scenario
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func runGolden(t *testing.T, db *FlightDB, scenarios []scenario, golden map[string]tau2test.Golden) {
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			g, ok := golden[sc.Name]
			if !ok || len(g.Results) != len(sc.Calls) {
				t.Fatalf("golden for %s missing or stale; run testdata/gen_golden.py", sc.Name)
			}
			tau2test.CheckCalls(t, NewEnvironment(db, ""), sc.Calls, g)
		})
	}
}

func TestGoldenFixture(t *testing.T) {
	runGolden(t, tau2test.Fixture(t, ParseDB), readScenarios(t, "scenarios_fixture.json"), tau2test.ReadGoldens(t, filepath.Join("testdata", "golden", "fixture.jsonl")))
}

// realBase loads the real airline DB or skips.
func realBase(t testing.TB) (string, *Base) { return tau2test.RealBase(t, LoadBase) }

func TestGoldenRealDB(t *testing.T) {
	_, b := realBase(t)
	runGolden(t, b.DB, readScenarios(t, "scenarios_real.json"), tau2test.ReadGoldens(t, filepath.Join("testdata", "golden", "real.jsonl")))
}

// TestRealDBHash pins the hash of the pristine DB to the value τ²'s
// get_db_hash gives (FlightDB.load(db.json).get_hash()).
func TestRealDBHash(t *testing.T) {
	_, b := realBase(t)
	h, err := env.DBHash(b.DB)
	if err != nil {
		t.Fatal(err)
	}
	const want = "124e39a664b56402bcd09cb8a6a9cece6acb8462337c969799d5658e3250f263"
	if h != want {
		t.Fatalf("hash %s, want %s", h, want)
	}
}

func TestSchemasIdentical(t *testing.T) {
	dir, _ := realBase(t)
	if err := env.CheckSchemas(dir, "airline", Toolkit, nil); err != nil {
		t.Fatal(err)
	}
}
