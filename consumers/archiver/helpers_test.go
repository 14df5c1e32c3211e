package archiver_test

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/consumers/archiver"
	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
)

// testRow is the row of the test sink: the id column the archiver reads back
// at start-up, plus fields the tests check. The archiver's durability logic is
// independent of the row layout; the schemas sink is tested separately.
type testRow struct {
	ID     string `parquet:"id"`
	TaskID string `parquet:"task_id"`
	Domain string `parquet:"domain"`
	Split  string `parquet:"split"`
	Reward float64
}

type testSink struct {
	w *parquet.GenericWriter[testRow]
}

func newTestSink(w io.Writer) (archiver.Sink, error) {
	return &testSink{w: parquet.NewGenericWriter[testRow](w, parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}))}, nil
}

func (s *testSink) Write(trajs []*schemas.Trajectory) error {
	rows := make([]testRow, len(trajs))
	for i, t := range trajs {
		rows[i] = testRow{ID: t.ID, TaskID: t.TaskID, Domain: t.Domain, Split: t.Split, Reward: t.Reward}
	}
	_, err := s.w.Write(rows)
	return err
}
func (s *testSink) Flush() error                    { return s.w.Flush() }
func (s *testSink) SetKeyValueMetadata(k, v string) { s.w.SetKeyValueMetadata(k, v) }
func (s *testSink) Size() int64                     { return s.w.Size() }
func (s *testSink) Close() error                    { return s.w.Close() }

// env is a broker plus the Kafka config pointing at it.
type env struct {
	broker  *embedded.Broker
	kc      tkafka.Config
	dataDir string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{dataDir: t.TempDir()}
	e.start(t, 0)
	return e
}

func (e *env) start(t testing.TB, port int) {
	t.Helper()
	b, err := embedded.Start(embedded.Config{Port: port, DataDir: e.dataDir, MinSessionTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	e.broker = b
	t.Cleanup(b.Close)
	kc := tkafka.DefaultConfig()
	kc.Brokers = []string{b.Addr()}
	kc.Partitions = 4
	kc.Reader.SessionTimeout = time.Second
	kc.Reader.HeartbeatInterval = 200 * time.Millisecond
	kc.Reader.MaxWait = 50 * time.Millisecond
	e.kc = kc
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tkafka.EnsureTopics(ctx, kc); err != nil {
		t.Fatal(err)
	}
}

func testConfig(dir string) archiver.Config {
	cfg := archiver.DefaultConfig()
	cfg.DatasetDir = dir
	cfg.Roll.MaxAge = 300 * time.Millisecond
	cfg.CommitInterval = 50 * time.Millisecond
	return cfg
}

// openArchiver wires an archiver to the env's Kafka with the test sink.
func openArchiver(t testing.TB, ctx context.Context, e *env, cfg archiver.Config, fsys archiver.FS, reg prometheus.Registerer) (*archiver.Archiver, error) {
	t.Helper()
	km, err := tkafka.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	am, err := archiver.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return archiver.OpenKafka(ctx, cfg, e.kc, archiver.Deps{FS: fsys, NewSink: newTestSink, Metrics: am, Log: testLog}, km)
}

// smallTrajectories returns n valid synthetic trajectories spread over domains.
func smallTrajectories(seed uint64, n int) []*schemas.Trajectory {
	rng := rand.New(rand.NewPCG(seed, 7))
	o := schemas.DefaultSyntheticOptions()
	o.Calls, o.ContextTokens, o.CompletionTokens, o.ThinkTokens = 3, 256, 16, 4
	domains := []string{"airline", "retail", "telecom"}
	out := make([]*schemas.Trajectory, n)
	for i := range out {
		o.Domain = domains[i%len(domains)]
		out[i] = schemas.Synthetic(rng, o)
	}
	return out
}

func publish(t testing.TB, ctx context.Context, e *env, trajs []*schemas.Trajectory) {
	t.Helper()
	w, err := tkafka.NewWriter(e.kc, e.kc.Topics.Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var msgs []schemas.Framed
	for _, tr := range trajs {
		f, err := schemas.FrameTrajectories(tr)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, f)
	}
	if err := w.PublishFramed(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

func publishRaw(t testing.TB, ctx context.Context, e *env, msgs ...tkafka.Message) {
	t.Helper()
	w, err := tkafka.NewWriter(e.kc, e.kc.Topics.Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// waitCommitted waits until the archiver group has committed the end of the
// trajectories topic.
func waitCommitted(t testing.TB, ctx context.Context, e *env, group string) {
	t.Helper()
	admin, err := tkafka.NewAdmin(e.kc)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ends, err1 := admin.EndOffsets(ctx, e.kc.Topics.Trajectories)
		com, err2 := admin.CommittedOffsets(ctx, group, e.kc.Topics.Trajectories)
		if err1 == nil && err2 == nil {
			done := true
			for p, end := range ends {
				if end > 0 && com[p] != end {
					done = false
				}
			}
			if done {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("archiver did not commit the whole topic: ends %v committed %v (%v %v)", ends, com, err1, err2)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// datasetView is what a reader of the dataset directory sees.
type datasetView struct {
	rows   []testRow
	files  []string // relative paths of visible data files
	hidden []string // temporary files
	dirs   []string // partition directories
}

func readDataset(t testing.TB, root string) datasetView {
	t.Helper()
	var ds datasetView
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if strings.Count(rel, string(filepath.Separator)) == 1 {
				ds.dirs = append(ds.dirs, rel)
			}
			return nil
		}
		switch {
		case strings.HasSuffix(d.Name(), ".tmp"):
			ds.hidden = append(ds.hidden, rel)
		case strings.HasSuffix(d.Name(), ".parquet"):
			if !archiver.IsDataFile(d.Name()) {
				t.Fatalf("unexpected visible file %s", rel)
			}
			rows, err := parquet.ReadFile[testRow](p)
			if err != nil {
				t.Fatalf("visible file %s is not a complete Parquet file: %v", rel, err)
			}
			ds.files = append(ds.files, rel)
			ds.rows = append(ds.rows, rows...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(ds.dirs)
	return ds
}

// checkExactlyOnce asserts that the dataset holds each id of want exactly once.
func checkExactlyOnce(t testing.TB, ds datasetView, want []*schemas.Trajectory) {
	t.Helper()
	count := map[string]int{}
	for _, r := range ds.rows {
		count[r.ID]++
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("trajectory %s archived %d times", id, n)
		}
	}
	for _, tr := range want {
		if count[tr.ID] == 0 {
			t.Errorf("trajectory %s lost", tr.ID)
		}
	}
	if len(ds.rows) != len(want) {
		t.Errorf("dataset has %d rows, want %d", len(ds.rows), len(want))
	}
}

func runAsync(ctx context.Context, a *archiver.Archiver) <-chan error {
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return done
}

// runUntilCommitted runs a until the group has committed the end of the
// trajectories topic, then stops it; the run must end without an error.
func runUntilCommitted(t testing.TB, ctx context.Context, e *env, a *archiver.Archiver, group string) {
	t.Helper()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := runAsync(runCtx, a)
	waitCommitted(t, ctx, e, group)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// testLog shows warnings and errors only, keeping test output readable.
var testLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
