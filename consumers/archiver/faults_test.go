package archiver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tau2rl/consumers/archiver"
	"tau2rl/lib/stream"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
)

// fullFS is the OS filesystem with a byte budget: once the data written to
// files exceeds it, writes fail with ENOSPC, as on a full disk.
type fullFS struct {
	archiver.OSFS
	mu     sync.Mutex
	budget int64
}

func (f *fullFS) Create(p string) (archiver.File, error) {
	file, err := f.OSFS.Create(p)
	if err != nil {
		return nil, err
	}
	return &limitedFile{File: file, fs: f}, nil
}

type limitedFile struct {
	archiver.File
	fs *fullFS
}

func (l *limitedFile) Write(b []byte) (int, error) {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if int64(len(b)) > l.fs.budget {
		n := int(max(l.fs.budget, 0))
		l.fs.budget = 0
		w, _ := l.File.Write(b[:n])
		return w, &os.PathError{Op: "write", Path: "dataset", Err: syscall.ENOSPC}
	}
	l.fs.budget -= int64(len(b))
	return l.File.Write(b)
}

// offsetsByID reads the whole topic and returns, per trajectory id, its
// partition and offset.
func offsetsByID(t *testing.T, ctx context.Context, e *env, n int) map[string][2]int64 {
	t.Helper()
	r, err := tkafka.NewGroupReader(e.kc, fmt.Sprint("verify-", rand.Int()), []string{e.kc.Topics.Trajectories}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := map[string][2]int64{}
	for len(out) < n {
		m, err := r.Fetch(ctx)
		if err != nil {
			t.Fatalf("verify read after %d: %v", len(out), err)
		}
		trajs, err := schemas.UnframeTrajectories(m.Value, stream.HeaderMap(m))
		if err != nil {
			continue
		}
		for _, tr := range trajs {
			out[tr.ID] = [2]int64{int64(m.Partition), m.Offset}
		}
	}
	return out
}

// checkCommittedIsDurable asserts that every message below the group's
// committed offsets has its rows in the dataset.
func checkCommittedIsDurable(t *testing.T, ctx context.Context, e *env, group string, ds datasetView, where map[string][2]int64) {
	t.Helper()
	admin, err := tkafka.NewAdmin(e.kc)
	if err != nil {
		t.Fatal(err)
	}
	com, err := admin.CommittedOffsets(ctx, group, e.kc.Topics.Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range ds.rows {
		have[r.ID] = true
	}
	for id, po := range where {
		if next, ok := com[int(po[0])]; ok && po[1] < next && !have[id] {
			t.Errorf("offset %d of partition %d committed (next %d) but trajectory %s is not in the dataset", po[1], po[0], next, id)
		}
	}
}

// TestFullDiskInjected: the dataset filesystem runs out of space mid-run.
// The run stops with a clear error, leaves no visible partial file, commits
// nothing that is not on disk, and a later run (space freed) archives
// everything exactly once.
func TestFullDiskInjected(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trajs := smallTrajectories(3, 300)
	publish(t, ctx, e, trajs)
	cfg := testConfig(filepath.Join(t.TempDir(), "ds"))
	cfg.Roll.MaxBytes = 4 << 10 // many small files, so some are durable before the disk fills

	fsys := &fullFS{budget: 12 << 10}
	a, err := openArchiver(t, ctx, e, cfg, fsys, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(ctx)
	if err == nil || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("run on a full disk returned %v, want an ENOSPC error", err)
	}
	ds := readDataset(t, cfg.DatasetDir)
	if len(ds.hidden) != 0 {
		t.Fatalf("temporary files left after the failure: %v", ds.hidden)
	}
	if len(ds.rows) == 0 || len(ds.rows) >= len(trajs) {
		t.Fatalf("%d rows durable before the disk filled; the test needs a partial run", len(ds.rows))
	}
	where := offsetsByID(t, ctx, e, len(trajs))
	checkCommittedIsDurable(t, ctx, e, cfg.Group, ds, where)

	a2, err := openArchiver(t, ctx, e, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, ctx, e, a2, cfg.Group)
	checkExactlyOnce(t, readDataset(t, cfg.DatasetDir), trajs)
}

// TestFullDiskTmpfs is the same fault on a real filesystem: a small tmpfs
// mounted under the dataset directory (needs root; skipped otherwise).
func TestFullDiskTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; the injected-filesystem test covers the logic")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount tmpfs (%v: %s); the injected-filesystem test covers the logic", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	// Fill the tmpfs, then free 64 KiB for the dataset.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{1}, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	st, _ := os.Stat(filler)
	if err := os.Truncate(filler, st.Size()-64<<10); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trajs := smallTrajectories(4, 2000)
	publish(t, ctx, e, trajs)
	cfg := testConfig(filepath.Join(mnt, "ds"))
	cfg.Roll.MaxBytes = 8 << 10
	a, err := openArchiver(t, ctx, e, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(ctx)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("run on a full tmpfs returned %v, want ENOSPC", err)
	}
	t.Logf("full tmpfs: %v", err)
	ds := readDataset(t, cfg.DatasetDir)
	if len(ds.hidden) != 0 {
		t.Fatalf("temporary files left: %v", ds.hidden)
	}
	checkCommittedIsDurable(t, ctx, e, cfg.Group, ds, offsetsByID(t, ctx, e, len(trajs)))

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	a2, err := openArchiver(t, ctx, e, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, ctx, e, a2, cfg.Group)
	checkExactlyOnce(t, readDataset(t, cfg.DatasetDir), trajs)
}

// TestBrokerRestartMidStream closes the broker while the archiver runs and
// restarts it on the same port and data directory; the rest of the stream
// arrives and every trajectory is archived exactly once.
func TestBrokerRestartMidStream(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	trajs := smallTrajectories(5, 200)
	publish(t, ctx, e, trajs[:100])
	cfg := testConfig(filepath.Join(t.TempDir(), "ds"))
	a, err := openArchiver(t, ctx, e, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := runAsync(runCtx, a)
	time.Sleep(400 * time.Millisecond)
	port := e.broker.Port()
	e.broker.Close()
	time.Sleep(500 * time.Millisecond)
	e.start(t, port)
	publish(t, ctx, e, trajs[100:])
	waitCommitted(t, ctx, e, cfg.Group)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, readDataset(t, cfg.DatasetDir), trajs)
}

// TestOversizeMessageIsDeadLettered: a message above the archiver's limit is
// dead-lettered without decoding; the others are archived.
func TestOversizeMessageIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trajs := smallTrajectories(6, 20)
	rng := rand.New(rand.NewPCG(9, 9))
	o := schemas.DefaultSyntheticOptions()
	o.Calls, o.ContextTokens = 40, 20000
	big := schemas.Synthetic(rng, o)
	publish(t, ctx, e, trajs[:10])
	publish(t, ctx, e, []*schemas.Trajectory{big})
	publish(t, ctx, e, trajs[10:])
	cfg := testConfig(filepath.Join(t.TempDir(), "ds"))
	a, err := archiver.OpenKafka(ctx, cfg, e.kc, archiver.Deps{NewSink: newTestSink, MaxMessageBytes: 64 << 10, Log: testLog}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, ctx, e, a, cfg.Group)
	checkExactlyOnce(t, readDataset(t, cfg.DatasetDir), trajs)
	r, err := tkafka.NewGroupReader(e.kc, "ops", []string{e.kc.Topics.DeadLetters}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := tkafka.ParseDeadLetter(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.Error, "exceeds max_message_bytes") || string(m.Key) != big.TaskID {
		t.Fatalf("dead letter %+v key %q", info, m.Key)
	}
	if len(m.Value) < 64<<10 {
		t.Fatalf("dead letter value %d bytes: the raw message must be kept", len(m.Value))
	}
}

// TestRollBySizeAndOpenFileLimit: tiny roll sizes and a single open file
// produce many files, all complete, every row once.
func TestRollBySizeAndOpenFileLimit(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trajs := smallTrajectories(7, 40)
	publish(t, ctx, e, trajs)
	cfg := testConfig(filepath.Join(t.TempDir(), "ds"))
	cfg.Roll.MaxBytes = 2 << 10
	cfg.RowGroupBytes = 1 << 10
	cfg.MaxOpenFiles = 1
	cfg.Roll.MaxAge = time.Second // only the last file waits for it
	a, err := openArchiver(t, ctx, e, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCommitted(t, ctx, e, a, cfg.Group)
	ds := readDataset(t, cfg.DatasetDir)
	checkExactlyOnce(t, ds, trajs)
	if len(ds.files) < 10 {
		t.Fatalf("%d files; size rolls and the open-file limit should make many", len(ds.files))
	}
}

// TestSecondArchiverOnSameDatasetIsRefused: one archiver per dataset.
func TestSecondArchiverOnSameDatasetIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := testConfig(filepath.Join(t.TempDir(), "ds"))
	a, err := openArchiver(t, ctx, e, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = openArchiver(t, ctx, e, cfg, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "locked by another archiver") {
		t.Fatalf("second archiver: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := runAsync(runCtx, a)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// After the first one stops, the dataset can be opened again.
	a3, err := openArchiver(t, ctx, e, cfg, nil, nil)
	if err != nil {
		t.Fatalf("reopen after stop: %v", err)
	}
	runCtx, stop = context.WithCancel(ctx)
	done = runAsync(runCtx, a3)
	stop()
	<-done
}
