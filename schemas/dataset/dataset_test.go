package dataset

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"tau2rl/schemas"
)

// archive builds a small archive-shaped dataset: two domains, two days, policy versions 0–3,
// one infra-error row.
func archive(t *testing.T) (string, []*schemas.Trajectory) {
	t.Helper()
	rng := rand.New(rand.NewPCG(21, 22))
	var all []*schemas.Trajectory
	for i := 0; i < 24; i++ {
		o := schemas.DefaultSyntheticOptions()
		o.Calls, o.ContextTokens, o.CompletionTokens, o.ThinkTokens, o.Tasks = 4, 256, 24, 6, 5
		o.Domain = []string{"airline", "retail"}[i%2]
		o.Split = []string{"train", "test"}[i%3/2]
		o.PolicyVersion = int64(i % 4)
		o.Start = time.Date(2026, 1, 2+(i/2)%2, 10, 0, 0, 0, time.UTC)
		all = append(all, schemas.Synthetic(rng, o))
	}
	all[5].Status, all[5].Error = schemas.StatusInfraError, "user simulator: 503"
	root := t.TempDir()
	files, err := WritePartitioned(root, "part-00000", all[:12], schemas.DefaultParquetWriterOptions())
	if err != nil {
		t.Fatal(err)
	}
	more, err := WritePartitioned(root, "part-00001", all[12:], schemas.DefaultParquetWriterOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 || len(more) != 4 {
		t.Fatalf("files %v %v, want 4 partitions each", files, more)
	}
	// A temporary file of a writer in progress must be ignored.
	if err := os.WriteFile(filepath.Join(filepath.Dir(files[0]), ".part-9.parquet.123.tmp"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(files[0]), "_partial.parquet"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, all
}

func i64p(v int64) *int64     { return &v }
func f64p(v float64) *float64 { return &v }
func ids(ts []*schemas.Trajectory) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.ID)
	}
	sort.Strings(out)
	return out
}

func TestScanFilters(t *testing.T) {
	root, all := archive(t)
	ds, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Files) != 8 {
		t.Fatalf("%d files: %v", len(ds.Files), ds.Files)
	}
	tests := []struct {
		name   string
		filter Filter
		pruned int
	}{
		{"all ok", Filter{}, 0},
		{"with infra errors", Filter{IncludeInfraErrors: true}, 0},
		{"domain", Filter{Domains: []string{"retail"}}, 4},
		{"split", Filter{Splits: []string{"test"}}, 0},
		{"versions", Filter{MinPolicyVersion: i64p(1), MaxPolicyVersion: i64p(2)}, 0},
		{"reward", Filter{MinReward: f64p(0.5)}, 0},
		{"reward max", Filter{MaxReward: f64p(0.5)}, 0},
		{"tasks", Filter{TaskIDs: []string{"synthetic-task-1", "synthetic-task-3"}}, 0},
		{"combined", Filter{Domains: []string{"airline"}, MinPolicyVersion: i64p(2), MinReward: f64p(1)}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want []*schemas.Trajectory
			for _, tr := range all {
				if tc.filter.Match(tr) {
					want = append(want, tr)
				}
			}
			got, st, err := ds.ReadAll(context.Background(), tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids(got), ids(want)) {
				t.Fatalf("got %d trajectories, want %d", len(got), len(want))
			}
			if st.RowsMatched != int64(len(want)) || st.FilesPruned != tc.pruned || st.Files+st.FilesPruned != 8 {
				t.Fatalf("stats %+v (want %d matched, %d pruned)", st, len(want), tc.pruned)
			}
			if tc.pruned == 0 && st.RowsRead != int64(len(all)) {
				t.Fatalf("read %d rows, want %d", st.RowsRead, len(all))
			}
			byID := map[string]*schemas.Trajectory{}
			for _, w := range want {
				byID[w.ID] = w
			}
			for _, g := range got {
				if !reflect.DeepEqual(g, byID[g.ID]) {
					t.Fatalf("trajectory %s differs after the archive round trip", g.ID)
				}
			}
		})
	}
	if n := len(all) - 1; n < 20 {
		t.Fatal("fixture too small")
	}
}

func TestOpenPaths(t *testing.T) {
	root, _ := archive(t)
	glob, err := Open(filepath.Join(root, "domain=airline", "*", "*.parquet"))
	if err != nil || len(glob.Files) != 4 {
		t.Fatalf("glob: %v %v", glob, err)
	}
	dirGlob, err := Open(filepath.Join(root, "domain=*"))
	if err != nil || len(dirGlob.Files) != 8 {
		t.Fatalf("dir glob: %v %v", dirGlob, err)
	}
	one, err := Open(glob.Files[0])
	if err != nil || len(one.Files) != 1 {
		t.Fatalf("file: %v %v", one, err)
	}
	for _, bad := range []string{filepath.Join(root, "nope"), filepath.Join(root, "*.csv"), t.TempDir()} {
		if _, err := Open(bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

func TestFilterValidate(t *testing.T) {
	for _, f := range []Filter{
		{MinPolicyVersion: i64p(3), MaxPolicyVersion: i64p(2)},
		{MinReward: f64p(1), MaxReward: f64p(0)},
		{Domains: []string{"../etc"}},
	} {
		if err := f.Validate(); err == nil {
			t.Errorf("%+v accepted", f)
		}
		ds := &Dataset{Files: []string{"x.parquet"}}
		if _, err := ds.Scan(context.Background(), f, func(*schemas.Trajectory) error { return nil }); err == nil {
			t.Errorf("scan with %+v accepted", f)
		}
	}
}

func TestScanErrors(t *testing.T) {
	root, _ := archive(t)
	ds, _ := Open(root)
	stop := errors.New("stop")
	n := 0
	_, err := ds.Scan(context.Background(), Filter{}, func(*schemas.Trajectory) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("callback error: %v after %d", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ds.Scan(ctx, Filter{}, func(*schemas.Trajectory) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled scan: %v", err)
	}

	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.parquet")
	os.WriteFile(garbage, []byte("this is not parquet at all, not even close"), 0o644)
	gds, _ := Open(garbage)
	if _, err := gds.Scan(context.Background(), Filter{}, func(*schemas.Trajectory) error { return nil }); err == nil || !strings.Contains(err.Error(), "garbage.parquet") {
		t.Fatalf("garbage file: %v", err)
	}

	// A file of an unknown major version is refused with a version error.
	type row struct {
		ID string `parquet:"id"`
	}
	v2 := filepath.Join(dir, "v2.parquet")
	f, _ := os.Create(v2)
	w := parquet.NewGenericWriter[row](f, parquet.KeyValueMetadata(schemas.MetadataKeyVersion, "2.0"))
	w.Write([]row{{"a"}})
	w.Close()
	f.Close()
	vds, _ := Open(v2)
	if _, err := vds.Scan(context.Background(), Filter{}, func(*schemas.Trajectory) error { return nil }); !errors.Is(err, schemas.ErrUnsupportedVersion) {
		t.Fatalf("v2 file: %v", err)
	}
}

func TestWritePartitionedRejects(t *testing.T) {
	tr := schemas.Synthetic(rand.New(rand.NewPCG(1, 1)), schemas.DefaultSyntheticOptions())
	tr.Domain = "../../etc"
	if _, err := WritePartitioned(t.TempDir(), "p", []*schemas.Trajectory{tr}, schemas.DefaultParquetWriterOptions()); err == nil {
		t.Fatal("unsafe domain written")
	}
	if _, err := WritePartitioned(t.TempDir(), "../p", nil, schemas.DefaultParquetWriterOptions()); err == nil {
		t.Fatal("unsafe file name accepted")
	}
}

// TestScanDeduplicatesByID: the same trajectory ids archived twice (a
// producer retry after an archiver restart, a replay re-run) are yielded once
// and counted as duplicates; KeepDuplicates yields every row (issue 13
// item 5: readers de-duplicate by id as well as the archiver).
func TestScanDeduplicatesByID(t *testing.T) {
	root, all := archive(t)
	again := append([]*schemas.Trajectory(nil), all[:5]...)
	if _, err := WritePartitioned(root, "part-00002", again, schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	ds, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	f := Filter{IncludeInfraErrors: true}
	got, st, err := ds.ReadAll(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) || st.Duplicates != 5 || st.RowsMatched != int64(len(all)+5) {
		t.Fatalf("read %d trajectories, stats %+v; want %d and 5 duplicates", len(got), st, len(all))
	}
	seen := map[string]bool{}
	for _, tr := range got {
		if seen[tr.ID] {
			t.Fatalf("id %s yielded twice", tr.ID)
		}
		seen[tr.ID] = true
	}
	f.KeepDuplicates = true
	got, st, err = ds.ReadAll(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all)+5 || st.Duplicates != 0 {
		t.Fatalf("keep_duplicates: read %d, stats %+v; want %d", len(got), st, len(all)+5)
	}
}
