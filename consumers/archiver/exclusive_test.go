package archiver_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecondArchiverOfAnotherDatasetRefused: issue 27 item 4. Two archivers in one consumer
// group writing different directories each got part of the topic, and a rebalance put rows in
// both (1,174 of 3,606 ids in one trial). The second one is now refused at start with an error
// that says what to do; one in a group of its own writes a complete second copy; and the first
// archiver's directory is still its own after a restart (same dataset id).
func TestSecondArchiverOfAnotherDatasetRefused(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	trajs := smallTrajectories(4, 30)
	publish(t, ctx, e, trajs)

	cfgA := testConfig(filepath.Join(t.TempDir(), "a"))
	a, err := openArchiver(t, ctx, e, cfgA, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := runAsync(runCtx, a)
	waitCommitted(t, ctx, e, cfgA.Group)

	cfgB := testConfig(filepath.Join(t.TempDir(), "b"))
	_, err = openArchiver(t, ctx, e, cfgB, nil, nil)
	if err == nil {
		t.Fatal("a second archiver of another directory joined the same group")
	}
	for _, want := range []string{`consumer group "archiver" is consumed by the archiver of another dataset`, cfgB.DatasetDir, "archiver.group"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The refused archiver left its directory unlocked: the same directory in a group of its
	// own (a second, complete copy) starts and archives everything.
	cfgB.Group = "archiver-copy"
	b, err := openArchiver(t, ctx, e, cfgB, nil, nil)
	if err != nil {
		t.Fatalf("an archiver in its own group: %v", err)
	}
	bCtx, stopB := context.WithCancel(ctx)
	doneB := runAsync(bCtx, b)
	waitCommitted(t, ctx, e, cfgB.Group)
	stopB()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, readDataset(t, cfgB.DatasetDir), trajs)

	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, readDataset(t, cfgA.DatasetDir), trajs)
	// A restart of the first archiver on its directory is the same dataset: accepted.
	a2, err := openArchiver(t, ctx, e, cfgA, nil, nil)
	if err != nil {
		t.Fatalf("restart on the same directory: %v", err)
	}
	a2Ctx, stopA2 := context.WithCancel(ctx)
	doneA2 := runAsync(a2Ctx, a2)
	stopA2()
	if err := <-doneA2; err != nil {
		t.Fatal(err)
	}
}
