package airline

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/lib/tau2/data"
	"tau2rl/lib/tau2/env"
	"tau2rl/lib/tau2/pyjson"
)

// The golden files were produced by testdata/gen_golden.py with τ²-bench's
// own AirlineTools (a2c0247) and pydantic; every tool message (content and
// error flag) and the final DB hash must match byte for byte.

type scenario struct {
	Name  string      `json:"name"`
	Calls [][2]string `json:"calls"`
}

type goldenResult struct {
	Name    string `json:"name"`
	Results []struct {
		Content string `json:"content"`
		Error   bool   `json:"error"`
	} `json:"results"`
	DBHash string `json:"db_hash"`
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

func readGolden(t *testing.T, name string) map[string]goldenResult {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]goldenResult{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var g goldenResult
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		out[g.Name] = g
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// normalizePydantic maps the pydantic minor version in error URLs to the
// one τ² locks (the goldens were rendered with a newer pydantic).
func normalizePydantic(s string) string {
	return strings.ReplaceAll(s, "errors.pydantic.dev/2.13/", "errors.pydantic.dev/"+pyjson.PydanticVersion+"/")
}

func runGolden(t *testing.T, db *FlightDB, scenarios []scenario, golden map[string]goldenResult) {
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			g, ok := golden[sc.Name]
			if !ok || len(g.Results) != len(sc.Calls) {
				t.Fatalf("golden for %s missing or stale; run testdata/gen_golden.py", sc.Name)
			}
			e := NewEnvironment(db, "")
			for i, c := range sc.Calls {
				content, isErr := e.Call(env.Assistant, c[0], c[1])
				want := normalizePydantic(g.Results[i].Content)
				if content != want || isErr != g.Results[i].Error {
					t.Errorf("call %d %s(%s):\n got (%v) %s\nwant (%v) %s", i, c[0], c[1], isErr, content, g.Results[i].Error, want)
				}
			}
			h, _, err := e.Hashes()
			if err != nil {
				t.Fatal(err)
			}
			if h != g.DBHash {
				t.Errorf("db hash %s, want %s", h, g.DBHash)
			}
		})
	}
}

func loadFixture(t testing.TB) *FlightDB {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixture_db.json"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := ParseDB(b)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestGoldenFixture(t *testing.T) {
	runGolden(t, loadFixture(t), readScenarios(t, "scenarios_fixture.json"), readGolden(t, "fixture.jsonl"))
}

// realBase loads the real airline DB or skips.
func realBase(t testing.TB) (string, *Base) {
	t.Helper()
	dir, err := data.Dir("")
	if err != nil {
		t.Skipf("τ² data not available (set %s): %v", data.EnvVar, err)
	}
	b, err := LoadBase(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, b
}

func TestGoldenRealDB(t *testing.T) {
	_, b := realBase(t)
	runGolden(t, b.DB, readScenarios(t, "scenarios_real.json"), readGolden(t, "real.jsonl"))
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
