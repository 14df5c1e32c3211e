package tau2test_test

import (
	"os"
	"path/filepath"
	"testing"

	"tau2rl/tau2/pyjson"
	"tau2rl/tau2/tau2test"
)

func TestReadGoldens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.jsonl")
	lines := `{"name": "a", "results": [{"content": "ok", "error": false}, {"content": "Error: x", "error": true}], "db_hash": "h1"}
{"name": "b", "results": [], "db_hash": "h2"}
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	g := tau2test.ReadGoldens(t, path)
	if len(g) != 2 || g["a"].DBHash != "h1" || len(g["a"].Results) != 2 || !g["a"].Results[1].Error || g["b"].DBHash != "h2" {
		t.Fatalf("read %+v", g)
	}
}

func TestNormalizePydantic(t *testing.T) {
	in := "see https://errors.pydantic.dev/2.13/v/int_parsing"
	want := "see https://errors.pydantic.dev/" + pyjson.PydanticVersion + "/v/int_parsing"
	if got := tau2test.NormalizePydantic(in); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestDataDirFindsTheDomains: where the data is present, DataDir returns the root that holds the
// domains (otherwise it skips, as every caller does).
func TestDataDirFindsTheDomains(t *testing.T) {
	dir := tau2test.DataDir(t)
	if _, err := os.Stat(filepath.Join(dir, "tau2", "domains", "airline")); err != nil {
		t.Fatal(err)
	}
}
