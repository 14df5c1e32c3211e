package step

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/schemas"
	"tau2rl/trainer/admission"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/offsets"
	"tau2rl/trainer/trajtest"
)

// memSource is an in-memory Source recording commits.
type memSource struct {
	msgs    chan Message
	mu      sync.Mutex
	commits [][]offsets.Target
}

func newMemSource(msgs []Message) *memSource {
	s := &memSource{msgs: make(chan Message, len(msgs)+1)}
	for _, m := range msgs {
		s.msgs <- m
	}
	return s
}

func (s *memSource) Next(ctx context.Context) (Message, error) {
	select {
	case m := <-s.msgs:
		return m, nil
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

func (s *memSource) Commit(_ context.Context, t []offsets.Target) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits = append(s.commits, slices.Clone(t))
	return nil
}

func (s *memSource) lastCommit() []offsets.Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.commits) == 0 {
		return nil
	}
	return s.commits[len(s.commits)-1]
}

type recorder struct {
	mu       sync.Mutex
	reloads  []int64
	paths    []string
	versions []schemas.PolicyVersion
	requests []schemas.RolloutRequest
}

func (r *recorder) LoadWeights(_ context.Context, path string, v int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The checkpoint (or a fresh trainer's initial weights) must be complete before servers
	// load it: a checkpoint has its state file, the initial weights their model files.
	want := checkpoint.StateFile
	if filepath.Base(path) == InitialDir {
		want = "config.json"
	}
	if _, err := os.Stat(filepath.Join(path, want)); err != nil {
		return err
	}
	r.reloads = append(r.reloads, v)
	r.paths = append(r.paths, path)
	return nil
}

func (r *recorder) PublishVersion(_ context.Context, v schemas.PolicyVersion) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions = append(r.versions, v)
	return nil
}

func (r *recorder) PublishRequests(_ context.Context, reqs []schemas.RolloutRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, reqs...)
	return nil
}

func testConfig(t *testing.T) Config {
	cfg := DefaultConfig()
	cfg.BatchSize = 2
	cfg.Group.Size = 4
	cfg.Group.MinSize = 2
	cfg.Group.Timeout = time.Hour
	cfg.Actor.MBSpec.MaxTokensPerMB = 256
	cfg.Actor.Optimizer.LR = 1e-3
	cfg.Checkpoint.Dir = t.TempDir()
	cfg.Checkpoint.Keep = 2
	cfg.Checkpoint.DType = string(gpu.F32)
	cfg.Tick = 5 * time.Millisecond
	return cfg
}

// groupMessages frames each task's group as two messages of two trajectories on partition 0.
func groupMessages(t *testing.T, tasks []string, firstOffset int64, version int64) []Message {
	var out []Message
	off := firstOffset
	for i, task := range tasks {
		o := trajtest.Default()
		o.Version = version
		trajs, err := trajtest.Group(o, task, uint64(i+1), trajtest.Rewards(4))
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 4; k += 2 {
			out = append(out, Message{Trajectories: trajs[k : k+2], Topic: "traj", Partition: 0, Offset: off})
			off++
		}
	}
	return out
}

func newBackend(t *testing.T) gpu.Backend {
	b, err := cpu.NewRandom(gpu.TinyConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runTrainer(t *testing.T, tr *Trainer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTrainerSteps(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 3
	msgs := groupMessages(t, []string{"0", "1", "2", "3", "4", "5"}, 0, 0)
	// Noise the trainer must survive: a dead-lettered message, an infrastructure error, a
	// redelivered duplicate, a stale sample and an all-equal group (filtered).
	infra := msgs[0].Trajectories[0]
	infraCopy := *infra
	infraCopy.ID, infraCopy.Status, infraCopy.Error = "infra-1", schemas.StatusInfraError, "user simulator unreachable"
	stale := *msgs[1].Trajectories[0]
	stale.ID = "stale-1"
	stale.Calls = slices.Clone(stale.Calls)
	stale.Calls[0].VersionRuns = schemas.UniformVersion(-5, len(stale.Calls[0].CompletionTokens))
	o := trajtest.Default()
	equal, err := trajtest.Group(o, "9", 99, []float64{1, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	extra := []Message{
		{Topic: "traj", Partition: 0, Offset: 12},
		{Trajectories: []*schemas.Trajectory{&infraCopy, &stale, msgs[2].Trajectories[0]}, Topic: "traj", Partition: 0, Offset: 13},
		{Trajectories: equal, Topic: "traj", Partition: 1, Offset: 40},
	}
	src := newMemSource(append(extra, msgs...))
	rec := &recorder{}
	tasks := []admission.Task{{Domain: "airline", Split: "train", ID: "0"}, {Domain: "airline", Split: "train", ID: "1"}}
	adm, err := admission.New(cfg.Admission, tasks, cfg.Group.Size, cfg.BatchSize, cfg.MaxHeadOffpolicyness)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := NewMetrics(nil)
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: src, Reloader: rec, Versions: rec, Requests: rec, Admission: adm, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	if tr.Version() != 3 || tr.Step() != 3 {
		t.Fatalf("version %d step %d, want 3", tr.Version(), tr.Step())
	}
	// Version 0 first: the fresh trainer reloads the servers with its initial weights (written to
	// checkpoint.dir/initial: the backend has no model.path) before it issues a request.
	if !slices.Equal(rec.reloads, []int64{0, 1, 2, 3}) || len(rec.versions) != 4 || rec.versions[3].Version != 3 ||
		rec.versions[3].CheckpointPath != rec.paths[3] || rec.versions[0].CheckpointPath != filepath.Join(cfg.Checkpoint.Dir, InitialDir) {
		t.Fatalf("reloads %v versions %+v", rec.reloads, rec.versions)
	}
	// Admission: (max_head_offpolicyness 2 + 1) × B 2 = 6 requests live at most at version 0.
	if len(rec.requests) < 6 || rec.requests[0].GroupSize != 4 {
		t.Fatalf("%d requests", len(rec.requests))
	}
	// Everything consumed is trained or discarded and checkpointed: partition 0 commits up to
	// one past its last offset (13), partition 1 (filtered group) to 41.
	want := []offsets.Target{{Topic: "traj", Partition: 0, Next: 14}, {Topic: "traj", Partition: 1, Next: 41}}
	if got := src.lastCommit(); !slices.Equal(got, want) {
		t.Fatalf("last commit %v, want %v", got, want)
	}
	ckpt := &checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: 2}
	dir, st, ok, _, err := ckpt.Latest()
	if err != nil || !ok || st.Version != 3 || !slices.Equal(st.Offsets, want) {
		t.Fatalf("latest checkpoint %s %+v %v %v", dir, st, ok, err)
	}
	if _, err := os.Stat(ckpt.Path(1)); !os.IsNotExist(err) {
		t.Fatal("checkpoint v1 not pruned (keep 2)")
	}
	if _, err := gpu.LoadWeights(dir); err != nil {
		t.Fatalf("checkpoint not loadable: %v", err)
	}
	if st.Metrics["tree_token_ratio"] <= 0 || st.Metrics["tree_token_ratio"] >= 1 {
		t.Fatalf("tree token ratio %v", st.Metrics["tree_token_ratio"])
	}
}

// TestCommitWaitsForPendingGroupAndResume: a group that is still incomplete at a low offset holds
// the commit back; after a restart from the checkpoint, redelivered messages that were trained are
// skipped, and the pending group completes and trains.
func TestCommitWaitsForPendingGroupAndResume(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 1
	cfg.BatchSize = 1
	all := groupMessages(t, []string{"p", "q"}, 0, 0) // offsets 0,1 (p), 2,3 (q)
	first := []Message{all[0], all[2], all[3]}        // p half-delivered: offset 1 missing
	src := newMemSource(first)
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: src})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	got := src.lastCommit()
	if !slices.Equal(got, []offsets.Target{{Topic: "traj", Partition: 0, Next: 0}}) {
		t.Fatalf("commit %v: must stop at the pending group's offset 0", got)
	}
	ckpt := &checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: 2}
	dir, st, ok, _, err := ckpt.Latest()
	if err != nil || !ok {
		t.Fatal(err)
	}
	if len(st.TrainedAbove) != 4 {
		t.Fatalf("trained above %v, want q's 4 trajectories", st.TrainedAbove)
	}

	// Restart: Kafka redelivers from offset 0 (nothing committed past it) plus the missing message.
	be, err := cpu.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxSteps = 2
	src2 := newMemSource([]Message{all[0], all[2], all[3], all[1]})
	m, _ := NewMetrics(nil)
	tr2, err := New(cfg, Deps{Backend: be, Source: src2, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr2.Restore(st); err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr2)
	if tr2.Version() != 2 {
		t.Fatalf("version %d after resume, want 2", tr2.Version())
	}
	if got := src2.lastCommit(); !slices.Equal(got, []offsets.Target{{Topic: "traj", Partition: 0, Next: 4}}) {
		t.Fatalf("commit after resume %v", got)
	}
	if d := counterValue(t, m.Trajectories.WithLabelValues("duplicate")); d != 4 {
		t.Fatalf("%v duplicates skipped, want q's 4", d)
	}
}

func TestShutdownCheckpointsUnsavedSteps(t *testing.T) {
	cfg := testConfig(t)
	cfg.Checkpoint.Every = 10
	src := newMemSource(groupMessages(t, []string{"a", "b"}, 0, 0))
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: src})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tr.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for tr.Step() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, st, ok, _, _ := (&checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: 1}).Latest()
	if !ok || st.Version != 1 {
		t.Fatalf("no checkpoint of the unsaved step at shutdown: %+v", st)
	}
}

// syncBuffer is a bytes.Buffer safe for the trainer's goroutine and the test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTrainerSaysWhyItWaits: fed only groups whose members all have the same reward (all
// filtered), the trainer takes no step and says so at the info level — ready groups against
// batch_size, the dropped groups by reason, and the option that keeps them — instead of looking
// hung (the trainer's --help smoke run against a flawless scripted policy did).
func TestTrainerSaysWhyItWaits(t *testing.T) {
	cfg := testConfig(t)
	var msgs []Message
	for i, task := range []string{"a", "b", "c"} {
		trajs, err := trajtest.Group(trajtest.Default(), task, uint64(i+1), []float64{1, 1, 1, 1})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, Message{Trajectories: trajs, Topic: "traj", Partition: 0, Offset: int64(i)})
	}
	var logBuf syncBuffer
	var mu sync.Mutex
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { // every reading is 5 s later: the 30 s report comes after a few ticks
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(5 * time.Second)
		return clock
	}
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: newMemSource(msgs), Now: now,
		Log: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tr.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(logBuf.String(), "waiting for groups") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logBuf.String()
	for _, want := range []string{"waiting for groups", "ready_groups=0", "batch_size=2", "dropped_filtered_equal_rewards=3",
		"drop_equal_rewards=false"} {
		if !strings.Contains(out, want) {
			t.Errorf("log does not say %q:\n%s", want, out)
		}
	}
	if tr.Step() != 0 {
		t.Fatalf("took %d steps on filtered groups", tr.Step())
	}
}

// TestUngradedEpisodesCompleteTheirGroup: a request's episodes that cannot be trained on
// (not_evaluated: retail tasks without an NL-assertion judge; infra_error) complete their group
// with the others instead of leaving it open until group.timeout (an hour here; the default 15
// minutes stalled `make run RUN_ARGS=domain=retail`). A group left with fewer than min_size
// trainable episodes is dropped, and its offsets still commit.
func TestUngradedEpisodesCompleteTheirGroup(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 1
	var msgs []Message
	// c first: its drop must not hold back the commit of a and b.
	for i, task := range []string{"c", "a", "b"} {
		trajs, err := trajtest.Group(trajtest.Default(), task, uint64(i+1), []float64{0, 1, 0.5, 1})
		if err != nil {
			t.Fatal(err)
		}
		ungraded := 1 // groups a and b keep three trainable episodes
		if task == "c" {
			ungraded = 3 // group c keeps one: below min_size 2
		}
		for _, tr := range trajs[4-ungraded:] {
			tr.Status, tr.Error = schemas.StatusNotEvaluated, "NL assertions without a judge"
		}
		if task == "b" {
			trajs[3].Status, trajs[3].Error = schemas.StatusInfraError, "user simulator unreachable"
		}
		msgs = append(msgs, Message{Trajectories: trajs, Topic: "traj", Partition: 0, Offset: int64(i)})
	}
	src := newMemSource(msgs)
	m, _ := NewMetrics(nil)
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: src, Reloader: &recorder{}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if tr.Step() != 1 {
		t.Fatalf("step %d after the groups arrived, want 1 (the groups waited for group.timeout)", tr.Step())
	}
	if got, want := src.lastCommit(), []offsets.Target{{Topic: "traj", Partition: 0, Next: 3}}; !slices.Equal(got, want) {
		t.Fatalf("last commit %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(m.Groups.WithLabelValues("too_few_trainable")); got != 1 {
		t.Errorf("too_few_trainable groups %v, want 1 (group c)", got)
	}
	for verdict, want := range map[string]float64{"accepted": 7, "not_evaluated": 4, "infra_error": 1} {
		if got := testutil.ToFloat64(m.Trajectories.WithLabelValues(verdict)); got != want {
			t.Errorf("trajectories %s: %v, want %v", verdict, got, want)
		}
	}
}
