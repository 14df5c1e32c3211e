package archiver_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"tau2rl/consumers/archiver"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

// TestArchiveWithSchemasParquet runs the archiver with the real Parquet
// layout and reads the dataset back with schemas/dataset: every
// trajectory comes back with exactly the values it was published with.
func TestArchiveWithSchemasParquet(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trajs := smallTrajectories(11, 60)
	publish(t, ctx, e, trajs)
	cfg := testConfig(filepath.Join(t.TempDir(), "ds"))
	cfg.Parquet.RowGroupRows = 16
	a, err := archiver.OpenKafka(ctx, cfg, e.kc, archiver.Deps{Log: testLog}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, ctx, e, a, cfg.Group)
	ds, err := dataset.Open(cfg.DatasetDir)
	if err != nil {
		t.Fatal(err)
	}
	got, st, err := ds.ReadAll(ctx, dataset.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(trajs) || st.RowsRead != int64(len(trajs)) {
		t.Fatalf("read %d trajectories (%+v), want %d", len(got), st, len(trajs))
	}
	byID := func(ts []*schemas.Trajectory) {
		sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
	}
	byID(got)
	want := append([]*schemas.Trajectory(nil), trajs...)
	byID(want)
	for i := range want {
		a, err1 := schemas.EncodeBatch(want[i : i+1])
		b, err2 := schemas.EncodeBatch(got[i : i+1])
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("trajectory %s differs after archiving", want[i].ID)
		}
	}
	for _, f := range ds.Files {
		pf := openParquetFile(t, f)
		if err := schemas.CheckParquetFile(pf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, ok := pf.Lookup(schemas.MetaKafkaOffsets); !ok {
			t.Fatalf("%s lacks source offsets", f)
		}
		ids, err := archiver.ReadIDs(pf)
		if err != nil || len(ids) == 0 {
			t.Fatalf("%s ids: %v", f, err)
		}
	}
}
