package archiver_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

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

// TestArchiveFileBytesUnchanged: the archiver's Parquet sink, at its default configuration, writes
// exactly the bytes its own writer wrote before it moved onto schemas.ParquetWriter (issue 31: one
// Parquet writer): the same schema, zstd at the fastest level on every column, 256-row groups,
// 1 MiB page buffers, the schema version and close-time footer keys, created_by "tau2rl
// archiver". The reference is built here from parquet-go directly with those settings, so a
// change of any of them (a different zstd default included) fails.
func TestArchiveFileBytesUnchanged(t *testing.T) {
	trajs := smallTrajectories(7, 300) // more than one 256-row group
	meta := [][2]string{{schemas.MetaKafkaOffsets, `[]`}, {schemas.MetaRows, "300"}, {schemas.MetaWriter, "test"}}

	var want bytes.Buffer
	ref := parquet.NewGenericWriter[schemas.ParquetRow](&want,
		schemas.ParquetSchema,
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.MaxRowsPerRowGroup(256),
		parquet.PageBufferSize(1<<20),
		parquet.KeyValueMetadata(schemas.MetadataKeyVersion, schemas.SchemaVersion),
		parquet.CreatedBy("tau2rl archiver", schemas.SchemaVersion, ""),
	)
	rows := make([]schemas.ParquetRow, len(trajs))
	for i, tr := range trajs {
		r, err := schemas.ToParquetRow(tr)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = r
	}
	if _, err := ref.Write(rows); err != nil {
		t.Fatal(err)
	}
	for _, kv := range meta {
		ref.SetKeyValueMetadata(kv[0], kv[1])
	}
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}

	factory, err := archiver.ParquetSink(archiver.DefaultConfig().Parquet)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	sink, err := factory(&got)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(trajs); err != nil {
		t.Fatal(err)
	}
	for _, kv := range meta {
		sink.SetKeyValueMetadata(kv[0], kv[1])
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("archive file differs from the archiver's writer before the merge: %d bytes, want %d", got.Len(), want.Len())
	}
	// And what a reader sees: the archive's schema, zstd on every column chunk, 256-row groups.
	pf, err := parquet.OpenFile(bytes.NewReader(got.Bytes()), int64(got.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.CheckParquetFile(pf); err != nil {
		t.Fatal(err)
	}
	if !parquet.SameNodes(pf.Schema(), schemas.ParquetSchema) {
		t.Fatalf("schema %v, want %v", pf.Schema(), schemas.ParquetSchema)
	}
	if n := len(pf.RowGroups()); n != 2 {
		t.Fatalf("%d row groups, want 2 (256 + 44 rows)", n)
	}
	for _, rg := range pf.Metadata().RowGroups {
		for _, c := range rg.Columns {
			if c.MetaData.Codec.String() != "ZSTD" {
				t.Fatalf("column %v codec %v, want ZSTD", c.MetaData.PathInSchema, c.MetaData.Codec)
			}
		}
	}
}
