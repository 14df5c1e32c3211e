package release

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/consumers/release/internal/coldoc"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/manifest"
)

// archive builds an archive-shaped dataset: two days, three domains, two
// splits, policy versions 0..5, and one file that repeats trajectories of
// another (a producer duplicate). The first write carries source offsets
// in its footer like the archiver's files.
func archive(t *testing.T) (string, []*schemas.Trajectory) {
	t.Helper()
	root := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	o := schemas.DefaultSyntheticOptions()
	o.Calls, o.ContextTokens, o.CompletionTokens, o.ThinkTokens = 2, 128, 8, 2
	var all []*schemas.Trajectory
	for i := 0; i < 60; i++ {
		o.Domain = []string{"airline", "retail", "telecom"}[i%3]
		o.Split = []string{"train", "test"}[i%2]
		o.PolicyVersion = int64(i % 6)
		o.Start = time.Date(2026, 11, 20+i%2, 1, 0, 0, 0, time.UTC)
		all = append(all, schemas.Synthetic(rng, o))
	}
	opts := schemas.DefaultParquetWriterOptions()
	opts.Metadata = map[string]string{schemas.MetaKafkaOffsets: `[{"topic":"tau2.trajectories","partition":1,"first":10,"last":70,"messages":30}]`}
	if _, err := dataset.WritePartitioned(root, "part-a", all[:40], opts); err != nil {
		t.Fatal(err)
	}
	opts.Metadata = map[string]string{schemas.MetaKafkaOffsets: `[{"topic":"tau2.trajectories","partition":2,"first":0,"last":5,"messages":6}]`}
	if _, err := dataset.WritePartitioned(root, "part-b", all[40:], opts); err != nil {
		t.Fatal(err)
	}
	// part-c repeats five trajectories of part-a.
	if _, err := dataset.WritePartitioned(root, "part-c", all[:5], schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	// A temporary file of a running archiver is never released.
	tmp := filepath.Join(root, "domain=airline", "date=2026-11-20", ".part-x.parquet.tmp")
	if err := os.WriteFile(tmp, []byte("half-written"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, all
}

func TestCutEverythingDeduplicates(t *testing.T) {
	src, all := archive(t)
	out := filepath.Join(t.TempDir(), "rel-all")
	m, err := Cut(context.Background(), Config{Source: src, Out: out, Parquet: schemas.DefaultParquetWriterOptions()}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != int64(len(all)) || m.DuplicatesDropped != 5 {
		t.Fatalf("rows %d duplicates %d, want %d and 5", m.Rows, m.DuplicatesDropped, len(all))
	}
	if m.Name != "rel-all" || m.SchemaVersion != schemas.SchemaVersion {
		t.Fatalf("manifest header %+v", m)
	}
	modes := map[string]int{}
	for _, f := range m.Files {
		modes[f.Mode]++
	}
	if modes["copy"] == 0 {
		t.Fatalf("files %+v: whole files should be copied", m.Files)
	}
	var sum int64
	for _, p := range m.Partitions {
		sum += p.Rows
	}
	if sum != m.Rows || len(m.Partitions) != 6 {
		t.Fatalf("partitions %+v", m.Partitions)
	}
	if len(m.KafkaOffsets) != 2 || m.KafkaOffsets[0].Partition != 1 || m.KafkaOffsets[0].Last != 70 {
		t.Fatalf("kafka offsets %+v", m.KafkaOffsets)
	}
	// The release is a dataset with each trajectory once.
	ds, err := dataset.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := ds.ReadAll(context.Background(), dataset.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, tr := range got {
		ids[tr.ID]++
	}
	for _, tr := range all {
		if ids[tr.ID] != 1 {
			t.Fatalf("trajectory %s appears %d times in the release", tr.ID, ids[tr.ID])
		}
	}
	// Manifest on disk verifies; a changed byte does not.
	rm, err := manifest.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.Verify(out, rm); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(out, filepath.FromSlash(rm.Files[0].Path))
	b, _ := os.ReadFile(victim)
	b[len(b)/2] ^= 0xff
	os.WriteFile(victim, b, 0o644)
	if err := manifest.Verify(out, rm); err == nil {
		t.Fatal("Verify accepted a corrupted file")
	}
	// A copied file is byte-identical to its source.
	for _, f := range m.Files {
		if f.Mode != "copy" {
			continue
		}
		a, _ := os.ReadFile(filepath.Join(src, filepath.FromSlash(f.Source)))
		c, _ := os.ReadFile(filepath.Join(out, filepath.FromSlash(f.Path)))
		if f.Path != rm.Files[0].Path && string(a) != string(c) {
			t.Fatalf("copied file %s differs from its source", f.Path)
		}
	}
	// A second cut into the same directory is refused.
	if _, err := Cut(context.Background(), Config{Source: src, Out: out}, nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("cut into a non-empty directory: %v", err)
	}
}

func TestCutFilters(t *testing.T) {
	src, all := archive(t)
	lo, hi := int64(2), int64(4)
	cfg := DefaultConfig()
	cfg.Source, cfg.Out = src, filepath.Join(t.TempDir(), "rel")
	one := 1.0
	cfg.Filter = dataset.Filter{Domains: []string{"airline", "retail"}, Splits: []string{"train"}, MinPolicyVersion: &lo, MaxPolicyVersion: &hi, MinReward: &one}
	cfg.DateFrom, cfg.DateTo = "2026-11-20T00:00:00Z", "2026-11-20" // as YAML overrides deliver it, and as typed
	m, err := Cut(context.Background(), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, tr := range all {
		d := tr.EndedAt.UTC().Format("2006-01-02")
		if (tr.Domain == "airline" || tr.Domain == "retail") && tr.Split == "train" &&
			tr.PolicyVersionStart >= lo && tr.PolicyVersionStart <= hi && d == "2026-11-20" && tr.Reward >= 1 {
			want[tr.ID] = true
		}
	}
	if len(want) == 0 || m.Rows != int64(len(want)) {
		t.Fatalf("released %d rows, want %d", m.Rows, len(want))
	}
	ds, err := dataset.Open(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := ds.ReadAll(context.Background(), dataset.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range got {
		if !want[tr.ID] {
			t.Fatalf("trajectory %s (domain %s split %s v%d) should not be released", tr.ID, tr.Domain, tr.Split, tr.PolicyVersionStart)
		}
	}
	for _, f := range m.Files {
		if f.Mode != "rewrite" {
			t.Fatalf("%s: a filtered subset must be rewritten, got %s", f.Path, f.Mode)
		}
	}
	var mj map[string]any
	b, _ := os.ReadFile(filepath.Join(cfg.Out, "manifest.json"))
	if err := json.Unmarshal(b, &mj); err != nil {
		t.Fatal(err)
	}
	if mj["filters"].(map[string]any)["date_from"] != "2026-11-20" {
		t.Fatalf("filters not recorded: %v", mj["filters"])
	}
}

func TestConfigValidate(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no out":        {Source: "x"},
		"bad date":      {Source: "x", Out: "y", DateFrom: "21/11/2026"},
		"inverted date": {Source: "x", Out: "y", DateFrom: "2026-11-22", DateTo: "2026-11-21"},
		"unsafe domain": {Source: "x", Out: "y", Filter: dataset.Filter{Domains: []string{"../etc"}}},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCardDocumentsEveryColumn: the card lists every Parquet column of the
// schema with a description, and columns_gen.go matches the schemas source.
func TestCardDocumentsEveryColumn(t *testing.T) {
	cols, err := coldoc.Extract("../../schemas")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(coldoc.Paths(cols), ","), strings.Join(coldoc.Paths(toCols(columnDocs)), ","); got != want {
		t.Fatalf("columns_gen.go is stale; run go generate ./consumers/release\nschemas: %s\ngenerated: %s", got, want)
	}
	for i, c := range cols {
		if columnDocs[i].Doc != c.Doc {
			t.Fatalf("column %s doc changed in schemas; run go generate ./consumers/release", c.Path)
		}
	}
	types := columnTypes(schemas.ParquetSchema)
	documented := map[string]bool{}
	for _, c := range columnDocs {
		documented[c.Path] = true
	}
	for p := range types {
		if !documented[p] {
			t.Errorf("column %s has no description", p)
		}
	}
	card, err := Card(&manifest.Manifest{Name: "x", SchemaVersion: schemas.SchemaVersion})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `messages.tool_calls.arguments` | string |", "| `calls.completion_tokens` | list<int32> |", "| `started_at` | timestamp (µs, UTC), nullable |"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("card lacks %q", want)
		}
	}
}

func toCols(ds []columnDoc) []coldoc.Column {
	out := make([]coldoc.Column, len(ds))
	for i, d := range ds {
		out[i] = coldoc.Column{Path: d.Path, Doc: d.Doc}
	}
	return out
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestSelectionUsesConfigKeys: the card lists the filters by the keys a user configures
// (filter.min_policy_version), not by Go field names (MinPolicyVersion), and leaves out what is
// not set (issue 27 item 21); schemas/manifest's TestSelectionRoundTrip checks the manifest's side.
func TestSelectionUsesConfigKeys(t *testing.T) {
	lo, one := int64(10), 1.0
	sel := manifest.Selection{Filter: dataset.Filter{Domains: []string{"airline"}, MinPolicyVersion: &lo, MinReward: &one}, DateFrom: "2026-11-01"}
	card, err := Card(&manifest.Manifest{Name: "x", SchemaVersion: schemas.SchemaVersion, Filters: sel})
	if err != nil {
		t.Fatal(err)
	}
	const want = "- Selection: `{\"filter\":{\"domains\":[\"airline\"],\"min_policy_version\":10,\"min_reward\":1},\"date_from\":\"2026-11-01\"}`\n"
	if !strings.Contains(string(card), want) {
		t.Fatalf("card's selection line is not %q:\n%s", want, card)
	}
}

// TestCutErrorsHaveOnePrefix: the command prints Cut's errors after "tau2-archiver release: ", so
// they must not start with "release: " again (issue 27 item 18 saw "tau2-archiver release:
// release: dataset: …"). The exact messages, as the command shows them.
func TestCutErrorsHaveOnePrefix(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	empty := t.TempDir()
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no out", Config{Source: missing}, "tau2-archiver release: source and out are required"},
		{"missing source", Config{Source: missing, Out: filepath.Join(t.TempDir(), "o")},
			"tau2-archiver release: source: dataset: stat " + missing + ": no such file or directory"},
		{"out not empty", Config{Source: empty, Out: full},
			"tau2-archiver release: " + full + " is not empty; a release is written into a new directory"},
		{"bad date", Config{Source: empty, Out: filepath.Join(t.TempDir(), "o"), DateFrom: "1/2/2026"},
			`tau2-archiver release: date_from "1/2/2026": want YYYY-MM-DD`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Cut(context.Background(), tc.cfg, quiet)
			if err == nil {
				t.Fatal("accepted")
			}
			if got := "tau2-archiver release: " + err.Error(); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
