// Package tau2test is the test scaffolding the τ² domain ports share (airline, retail, telecom,
// mock, the evaluator and the episode runner): the real τ² data or a skip with one clear message,
// a domain's fixture and real base, and the tool-call goldens that τ²-bench's own tools wrote
// (each domain's testdata says how), checked call by call and by the final DB hash. The domains
// compare against τ² the same way, so a difference in how they read or report a golden cannot
// hide in one copy.
package tau2test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/tau2/data"
	"tau2rl/tau2/env"
	"tau2rl/tau2/pyjson"
)

// DataDir returns the τ² data directory (data.Dir: $TAU2_DATA_DIR or ../shared/tau2-data, see
// docs/ASSETS.md), or skips tb where there is none; any other error (a directory that is there
// but unreadable) fails tb rather than skipping.
func DataDir(tb testing.TB) string {
	tb.Helper()
	dir, err := data.Dir("")
	if errors.Is(err, data.ErrNotFound) {
		tb.Skipf("τ² data not found (set %s or put it at ../shared/tau2-data): %v", data.EnvVar, err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// RealBase loads a domain's base from the real τ² data with load (the domain's LoadBase), or
// skips tb where the data is not present. It returns the data directory too.
func RealBase[B any](tb testing.TB, load func(dir string) (B, error)) (string, B) {
	tb.Helper()
	dir := DataDir(tb)
	b, err := load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return dir, b
}

// Fixture parses the domain's small test database, testdata/fixture_db.json, with parse (the
// domain's ParseDB).
func Fixture[DB any](tb testing.TB, parse func([]byte) (DB, error)) DB {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixture_db.json"))
	if err != nil {
		tb.Fatal(err)
	}
	db, err := parse(b)
	if err != nil {
		tb.Fatalf("fixture_db.json: %v", err)
	}
	return db
}

// Golden is one scenario as τ²'s own tools ran it: every tool message (content and error flag)
// in call order and the final DB hash (get_db_hash).
type Golden struct {
	Name    string `json:"name"`
	Results []struct {
		Content string `json:"content"`
		Error   bool   `json:"error"`
	} `json:"results"`
	DBHash string `json:"db_hash"`
}

// ReadGoldens reads a JSON-lines golden file (one Golden a line), keyed by scenario name.
func ReadGoldens(tb testing.TB, path string) map[string]Golden {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	out := map[string]Golden{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var g Golden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		out[g.Name] = g
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return out
}

// NormalizePydantic maps the pydantic minor version in error URLs to the one τ² locks (the
// goldens were rendered with a newer pydantic).
func NormalizePydantic(s string) string {
	return strings.ReplaceAll(s, "errors.pydantic.dev/2.13/", "errors.pydantic.dev/"+pyjson.PydanticVersion+"/")
}

// CheckCalls makes the agent's tool calls (name, JSON arguments) on e and compares every
// message and error flag with g, then the final DB hash. g must hold one result per call; the
// caller says how to regenerate a stale golden.
func CheckCalls(t *testing.T, e *env.Environment, calls [][2]string, g Golden) {
	t.Helper()
	if len(g.Results) != len(calls) {
		t.Fatalf("golden %s has %d results for %d calls", g.Name, len(g.Results), len(calls))
	}
	for i, c := range calls {
		content, isErr := e.Call(env.Assistant, c[0], c[1])
		want := NormalizePydantic(g.Results[i].Content)
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
}

// CheckReplays checks two environments that replayed the same task's gold actions: both reach
// the golden agent DB hash and the same state (env.SameState). It returns their hash. what names
// the task in messages.
func CheckReplays(tb testing.TB, what string, a, b *env.Environment, wantHash string) string {
	tb.Helper()
	ha, _, err := a.Hashes()
	if err != nil {
		tb.Fatal(err)
	}
	hb, _, err := b.Hashes()
	if err != nil {
		tb.Fatal(err)
	}
	if ha != wantHash || hb != wantHash {
		tb.Errorf("%s: hashes %v, want %s", what, []string{ha, hb}, wantHash)
	}
	if same, err := env.SameState(a, b); err != nil || !same {
		tb.Errorf("%s: replays differ (SameState=%v, %v)", what, same, err)
	}
	return ha
}

// BenchNewEnvironment times env.New(domain) after the first load (the base is cached).
func BenchNewEnvironment(b *testing.B, domain string) {
	dir := DataDir(b)
	if _, err := env.New(domain, env.Options{DataDir: dir}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := env.New(domain, env.Options{DataDir: dir}); err != nil {
			b.Fatal(err)
		}
	}
}
