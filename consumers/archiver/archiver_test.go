package archiver_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tau2rl/consumers/archiver"
	"tau2rl/lib/stream"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
)

// TestArchiveEndToEnd: valid trajectories land once each in their Hive
// partition; duplicates are dropped; malformed, unknown-major and
// unsafe-path messages go to dead letters and the archiver keeps going; all
// offsets are committed; no temporary file stays.
func TestArchiveEndToEnd(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trajs := smallTrajectories(1, 90)
	publish(t, ctx, e, trajs[:60])

	// Bad input, interleaved with good.
	good, err := schemas.FrameTrajectories(trajs[0])
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(version string) []tkafka.Header {
		h := schemas.Headers(schemas.ContentTypeArrowStream, schemas.MessageTypeTrajectories)
		h[schemas.HeaderSchemaVersion] = version
		return stream.FromFramed(schemas.Framed{Headers: h}).Headers
	}
	evil := *trajs[1]
	evil.ID = "evil-1"
	evil.Domain = "../../etc"
	evilValue, err := schemas.EncodeBatch([]*schemas.Trajectory{&evil})
	if err != nil {
		t.Fatalf("encode trajectory with unsafe domain: %v", err)
	}
	publishRaw(t, ctx, e,
		tkafka.Message{Key: []byte("task-x"), Value: []byte("definitely not arrow"), Headers: hdr(schemas.SchemaVersion)},
		tkafka.Message{Key: []byte("task-y"), Value: good.Value, Headers: hdr("2.0")},
		tkafka.Message{Key: []byte("task-z"), Value: evilValue, Headers: hdr(schemas.SchemaVersion)},
	)
	publish(t, ctx, e, trajs[60:])
	publish(t, ctx, e, trajs[10:20]) // producer duplicates

	reg := prometheus.NewRegistry()
	cfg := testConfig(filepath.Join(t.TempDir(), "ds"))
	a, err := openArchiver(t, ctx, e, cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, ctx, e, a, cfg.Group)

	ds := readDataset(t, cfg.DatasetDir)
	checkExactlyOnce(t, ds, trajs)
	if len(ds.hidden) != 0 {
		t.Fatalf("temporary files left: %v", ds.hidden)
	}
	wantDirs := map[string]bool{}
	for _, tr := range trajs {
		d, _ := schemas.PartitionDir(tr.Domain, tr.EndedAt)
		wantDirs[filepath.FromSlash(d)] = true
	}
	if len(ds.dirs) != len(wantDirs) {
		t.Fatalf("partition dirs %v, want %v", ds.dirs, wantDirs)
	}
	for _, d := range ds.dirs {
		if !wantDirs[d] {
			t.Fatalf("unexpected partition dir %s", d)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.DatasetDir, "..", "..", "etc")); err == nil {
		t.Fatal("unsafe domain created a directory outside the dataset")
	}
	for _, r := range ds.rows {
		if r.ID == "evil-1" {
			t.Fatal("trajectory with unsafe domain archived")
		}
	}
	if a.Summary.DeadLetters != 3 || a.Summary.DuplicateRows != 10 {
		t.Fatalf("summary %+v: want 3 dead letters, 10 duplicate rows", a.Summary)
	}
	for reason, want := range map[string]float64{"decode": 1, "version": 1} {
		if got := testutil.ToFloat64(mustCounterVec(t, reg, "tau2rl_archiver_dead_letters_total", reason)); got != want {
			t.Errorf("dead letters %s = %v, want %v", reason, got, want)
		}
	}

	// The dead letters are on their topic, with the errors.
	r, err := tkafka.NewGroupReader(e.kc, "ops", []string{e.kc.Topics.DeadLetters}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var reasons []string
	for i := 0; i < 3; i++ {
		m, err := r.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		info, err := tkafka.ParseDeadLetter(m)
		if err != nil {
			t.Fatal(err)
		}
		if info.Topic != e.kc.Topics.Trajectories || info.Consumer != "archiver" {
			t.Fatalf("dead letter origin %+v", info)
		}
		reasons = append(reasons, info.Error)
	}
	all := strings.Join(reasons, "\n")
	for _, want := range []string{"unknown major 2", "../../etc"} {
		if !strings.Contains(all, want) {
			t.Errorf("dead letter errors %q lack %q", all, want)
		}
	}

	// Every file records its source offsets.
	for _, f := range ds.files {
		pf := openParquetFile(t, filepath.Join(cfg.DatasetDir, f))
		meta, ok := pf.Lookup(schemas.MetaKafkaOffsets)
		if !ok {
			t.Fatalf("%s lacks %s", f, schemas.MetaKafkaOffsets)
		}
		ranges, err := schemas.ParseOffsets(meta)
		if err != nil || len(ranges) == 0 {
			t.Fatalf("%s offsets %q: %v", f, meta, err)
		}
	}
}

func openParquetFile(t testing.TB, p string) *parquet.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

func mustCounterVec(t testing.TB, reg *prometheus.Registry, name, label string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == label {
					c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x", Help: "x"})
					c.Add(m.GetCounter().GetValue())
					return c
				}
			}
		}
	}
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "x", Help: "x"})
}

// failingCommits is a Source whose commits always fail: it simulates a crash
// after files were made durable but before their offsets were committed.
type failingCommits struct{ archiver.Source }

func (failingCommits) Commit(context.Context, ...tkafka.Message) error {
	return errors.New("simulated crash before commit")
}

// TestRestartAfterUncommittedFilesHasNoDuplicates: files durable but
// offsets not committed (a crash between rename and commit); the next run
// gets everything redelivered and drops it all as duplicates.
func TestRestartAfterUncommittedFilesHasNoDuplicates(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trajs := smallTrajectories(2, 40)
	publish(t, ctx, e, trajs)
	cfg := testConfig(filepath.Join(t.TempDir(), "ds"))

	r, err := tkafka.NewGroupReader(e.kc, cfg.Group, []string{e.kc.Topics.Trajectories}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dl, err := tkafka.NewDeadLetters(e.kc, "archiver", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	a, err := archiver.Open(ctx, cfg, archiver.Deps{
		Source: failingCommits{r}, DeadLetters: dl, NewSink: newTestSink, Topic: e.kc.Topics.Trajectories, Log: testLog,
		Committed: func(context.Context) (map[int]int64, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := runAsync(runCtx, a)
	for {
		if ds := readDataset(t, cfg.DatasetDir); len(ds.rows) == len(trajs) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("first run did not archive everything")
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	<-done
	admin, _ := tkafka.NewAdmin(e.kc)
	// The group reader commits only where it started (offset 0: the group had no position);
	// nothing past it.
	com, err := admin.CommittedOffsets(ctx, cfg.Group, e.kc.Topics.Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	for p, next := range com {
		if next != 0 {
			t.Fatalf("offsets committed despite the simulated crash: partition %d at %d (%v)", p, next, com)
		}
	}

	reg := prometheus.NewRegistry()
	a2, err := openArchiver(t, ctx, e, cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	if a2.Summary.PinnedIDs != len(trajs) {
		t.Fatalf("start-up pinned %d ids, want %d", a2.Summary.PinnedIDs, len(trajs))
	}
	runUntilCommitted(t, ctx, e, a2, cfg.Group)
	checkExactlyOnce(t, readDataset(t, cfg.DatasetDir), trajs)
	if a2.Summary.Duplicates != len(trajs) || a2.Summary.Rows != 0 {
		t.Fatalf("second run summary %+v: want everything dropped as duplicates", a2.Summary)
	}
}

// TestDuplicatesAcrossRestartsAreDropped: ids archived and committed by one
// run, re-published after a restart (a replay re-run, a producer retry), are
// dropped by the next run, which reloads the newest files' ids into its
// dedup window; ids older than the window are not (the documented limit).
// Before the window was reloaded from the dataset, only uncommitted files'
// ids were known after a restart (issue 13 item 5).
func TestDuplicatesAcrossRestartsAreDropped(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trajs := smallTrajectories(5, 40)
	cfg := testConfig(filepath.Join(t.TempDir(), "ds"))

	publish(t, ctx, e, trajs[:30])
	a, err := openArchiver(t, ctx, e, cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, ctx, e, a, cfg.Group)
	checkExactlyOnce(t, readDataset(t, cfg.DatasetDir), trajs[:30])

	publish(t, ctx, e, trajs[:10])   // re-published after the restart
	publish(t, ctx, e, trajs[30:40]) // and new ones
	a2, err := openArchiver(t, ctx, e, cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if a2.Summary.LoadedIDs != 30 || a2.Summary.PinnedIDs != 0 {
		t.Fatalf("start-up summary %+v: want 30 loaded ids, none pinned", a2.Summary)
	}
	runUntilCommitted(t, ctx, e, a2, cfg.Group)
	checkExactlyOnce(t, readDataset(t, cfg.DatasetDir), trajs)
	if a2.Summary.DuplicateRows != 10 || a2.Summary.Rows != 10 {
		t.Fatalf("second run summary %+v: want 10 duplicates dropped, 10 rows written", a2.Summary)
	}

	// A window of 5 ids keeps only the newest file's last 5: an id archived
	// before them is written again (the archiver's documented limit; readers
	// de-duplicate by id).
	cfg.DedupWindow = 5
	publish(t, ctx, e, trajs[:1])
	a3, err := openArchiver(t, ctx, e, cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if a3.Summary.LoadedIDs != 5 {
		t.Fatalf("start-up loaded %d ids, want the window's 5", a3.Summary.LoadedIDs)
	}
	runUntilCommitted(t, ctx, e, a3, cfg.Group)
	if a3.Summary.Rows != 1 {
		t.Fatalf("third run summary %+v: an id older than the window should be archived again", a3.Summary)
	}
}
