package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

func TestParseRejects(t *testing.T) {
	good := `{"schema_version":"1.0","rows":2,"files":[{"path":"domain=a/date=2026-01-01/part-1.parquet","rows":2,"bytes":10,"sha256":"` + strings.Repeat("a", 64) + `"}]}`
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{
		"not json":      `{`,
		"major 2":       strings.Replace(good, `"1.0"`, `"2.0"`, 1),
		"escape":        strings.Replace(good, "domain=a", "..", 1),
		"absolute":      strings.Replace(good, `"domain=a`, `"/etc`, 1),
		"row mismatch":  strings.Replace(good, `"rows":2,"files"`, `"rows":3,"files"`, 1),
		"short sha":     strings.Replace(good, strings.Repeat("a", 64), "abc", 1),
		"missing files": `{"schema_version":"1.0","rows":1}`,
	} {
		if _, err := Parse([]byte(s)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"schema_version":"1.0","rows":2,"files":[{"path":"domain=a/date=2026-01-01/part-1.parquet","rows":2,"bytes":10,"sha256":"` + strings.Repeat("a", 64) + `"}]}`))
	f.Add([]byte(`{"schema_version":"1.0","rows":0}`))
	f.Add([]byte(`{"schema_version":"1.0","rows":1,"files":[{"path":"a/../../b","rows":1,"sha256":"` + strings.Repeat("0", 64) + `"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		for _, fm := range m.Files {
			if strings.HasPrefix(fm.Path, "/") || slices.Contains(strings.Split(fm.Path, "/"), "..") {
				t.Fatalf("accepted unsafe path %q", fm.Path)
			}
		}
	})
}

// TestSelectionRoundTrip: the manifest lists the filters by the keys a user configures
// (filter.min_policy_version), not by Go field names (MinPolicyVersion), and leaves out what is
// not set (issue 27 item 21); manifests written with the Go names still parse.
func TestSelectionRoundTrip(t *testing.T) {
	lo, one := int64(10), 1.0
	sel := Selection{Filter: dataset.Filter{Domains: []string{"airline"}, MinPolicyVersion: &lo, MinReward: &one}, DateFrom: "2026-11-01"}
	const want = `{"filter":{"domains":["airline"],"min_policy_version":10,"min_reward":1},"date_from":"2026-11-01"}`
	b, err := json.Marshal(sel)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("selection %s, want %s", b, want)
	}
	var back Selection
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if *back.Filter.MinPolicyVersion != 10 || *back.Filter.MinReward != 1 || back.Filter.Domains[0] != "airline" || back.DateFrom != "2026-11-01" {
		t.Fatalf("round trip: %+v", back)
	}
	var old Selection
	if err := json.Unmarshal([]byte(`{"filter":{"Domains":["retail"],"MinPolicyVersion":3,"IncludeInfraErrors":false},"date_to":"2026-11-30"}`), &old); err != nil {
		t.Fatal(err)
	}
	if *old.Filter.MinPolicyVersion != 3 || old.Filter.Domains[0] != "retail" || old.DateTo != "2026-11-30" {
		t.Fatalf("a manifest with Go field names: %+v", old)
	}
}

// TestVerify: a release whose files match the manifest verifies; a changed byte, a missing file
// and a path that escapes the release are each reported.
func TestVerify(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "domain=a", "date=2026-01-01", "part-1.parquet")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("PAR1 rows PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	size, sum, err := Hash(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{SchemaVersion: schemas.SchemaVersion, Rows: 1,
		Files: []File{{Path: "domain=a/date=2026-01-01/part-1.parquet", Rows: 1, Bytes: size, SHA256: sum}}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	read, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir, read); err != nil {
		t.Fatalf("an unchanged release: %v", err)
	}
	if err := os.WriteFile(p, []byte("PAR1 rowz PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(dir, read); err == nil || !strings.Contains(err.Error(), "manifest says") {
		t.Fatalf("a changed byte: %v", err)
	}
	for name, fm := range map[string]File{
		"missing": {Path: "domain=a/date=2026-01-01/gone.parquet", SHA256: sum},
		"escape":  {Path: "../outside.parquet", SHA256: sum},
	} {
		if err := Verify(dir, &Manifest{Files: []File{fm}}); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}
