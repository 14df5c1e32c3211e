package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
)

// TestStaleCommitNeverMovesOffsetsBack reproduces issue 27 item 3 with two members of one
// group on the embedded broker. Member A fetches every message while it owns every partition,
// then blocks (a paused process: it holds commits it has not sent). Member B joins, the group
// rebalances, and B consumes and commits its partitions to the end. When A resumes and sends its
// held commit — in the new generation, to which it has rejoined — the commit must not touch B's
// partitions (A no longer owns them) and must not lower any committed offset. Then B leaves, A
// owns every partition again from B's commits, and A's held commit, sent once more, must again
// change nothing: it is below what the group has committed.
//
// Before the fix the GroupReader committed whatever it was given in its current generation, so
// both steps rolled the committed offsets back (the redelivery and false Tau2PartitionStalled of
// the issue).
func TestStaleCommitNeverMovesOffsetsBack(t *testing.T) {
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 90*time.Second)
	topic := cfg.Topics.Trajectories
	if err := tkafka.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	const n = 80
	writeN(t, ctx, cfg, topic, "m", n)
	admin, err := tkafka.NewAdmin(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const group = "stale-commit"

	a, err := tkafka.NewGroupReader(cfg, group, []string{topic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// A reads everything; its held commit is the middle message of each partition (the work it
	// finished before it was paused).
	byPart := map[int][]tkafka.Message{}
	for i := 0; i < n; i++ {
		m, err := a.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byPart[m.Partition] = append(byPart[m.Partition], m)
	}
	if len(byPart) < 2 {
		t.Fatalf("messages landed in %d partitions; the test needs at least 2", len(byPart))
	}
	var held []tkafka.Message
	for _, ms := range byPart {
		held = append(held, ms[len(ms)/2])
	}

	b, err := tkafka.NewGroupReader(cfg, group, []string{topic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bClosed := false
	defer func() {
		if !bClosed {
			b.Close()
		}
	}()
	// B consumes what it is assigned (the rebalance has completed once it gets a message: every
	// member, A included, has rejoined) and commits each of its partitions to the end.
	bNext := map[int]int64{}
	for {
		fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		m, err := b.Fetch(fctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && len(bNext) > 0 {
			break
		}
		if err != nil {
			t.Fatalf("member B fetch: %v", err)
		}
		bNext[m.Partition] = m.Offset + 1
	}
	for p, next := range bNext {
		if err := b.CommitOffset(ctx, topic, p, next); err != nil {
			t.Fatalf("member B commit %d@%d: %v", p, next, err)
		}
	}
	if len(bNext) == len(byPart) {
		t.Fatalf("member B got every partition (%v); the rebalance split nothing", bNext)
	}
	before := committed(t, ctx, admin, group, topic)
	for p, next := range bNext {
		if before[p] != next {
			t.Fatalf("partition %d (member B's): committed %d, B committed %d", p, before[p], next)
		}
	}

	// A resumes: its held commit must not lower anything, and must leave B's partitions alone.
	if err := a.Commit(ctx, held...); err != nil {
		t.Fatalf("member A's held commit: %v", err)
	}
	after := committed(t, ctx, admin, group, topic)
	for p, was := range before {
		if after[p] < was {
			t.Errorf("after A's held commit partition %d went back from %d to %d", p, was, after[p])
		}
	}
	for p, next := range bNext {
		if after[p] != next {
			t.Errorf("A committed partition %d, owned by B: %d, B committed %d", p, after[p], next)
		}
	}

	// B leaves; A owns every partition again, from B's commits. The held commit is now below the
	// group's committed offset on B's former partitions.
	bClosed = true
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	writeN(t, ctx, cfg, topic, "x", 20)
	// A has rejoined once it fetches a message of the second batch from a former B partition.
	for {
		m, err := a.Fetch(ctx)
		if err != nil {
			t.Fatalf("member A fetch after B left: %v", err)
		}
		if _, ok := bNext[m.Partition]; ok && m.Offset >= bNext[m.Partition] {
			break
		}
	}
	before = committed(t, ctx, admin, group, topic)
	if err := a.Commit(ctx, held...); err != nil {
		t.Fatalf("member A's held commit, sent again: %v", err)
	}
	after = committed(t, ctx, admin, group, topic)
	for p, was := range before {
		if after[p] < was {
			t.Errorf("after A's held commit sent again partition %d went back from %d to %d", p, was, after[p])
		}
	}
}

func committed(t *testing.T, ctx context.Context, admin *tkafka.Admin, group, topic string) map[int]int64 {
	t.Helper()
	c, err := admin.CommittedOffsets(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGroupLagOfLatestStartCountsFromStart: every GroupReader with registered metrics exports
// tau2rl_kafka_group_lag for its group (the trainer's and the producers' groups, not only the
// archiver's: issue 27 item 21), and a group that starts at the latest offset on a topic with a
// backlog shows the lag of what it has not consumed since it started — here the one message
// produced after it joined — rather than the whole end offset until its first commit.
func TestGroupLagOfLatestStartCountsFromStart(t *testing.T) {
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 60*time.Second)
	topic := cfg.Topics.Trajectories
	if err := tkafka.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	writeN(t, ctx, cfg, topic, "old", 30)
	cfg.Reader.StartOffset = "latest"
	reg := prometheus.NewRegistry()
	km, err := tkafka.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tkafka.NewGroupReader(cfg, "trainer", []string{topic}, km)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Produce until the member reads something: then it has joined and started at the end.
	var got tkafka.Message
	for i := 0; ; i++ {
		writeN(t, ctx, cfg, topic, "new", 1)
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		got, err = r.Fetch(fctx)
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) || i > 20 {
			t.Fatalf("fetch: %v", err)
		}
	}
	if !strings.HasPrefix(string(got.Value), "new") {
		t.Fatalf("a group starting at the latest offset read %q", got.Value)
	}
	lag := gatherSum(t, reg, "tau2rl_kafka_group_lag", map[string]string{"group": "trainer", "topic": topic})
	if lag < 0 {
		t.Fatal("no tau2rl_kafka_group_lag series for group trainer")
	}
	// What is not committed: the messages written since the member joined (at least the one it
	// read, at most one per attempt), never the 30 that were there before.
	if lag < 1 || lag >= 30 {
		t.Fatalf("group lag %v right after joining at the latest offset; want the messages produced since (not the 30 before)", lag)
	}
	if err := r.Commit(ctx, got); err != nil {
		t.Fatal(err)
	}
}

// gatherSum sums the samples of metric name whose labels include want; -1 when there is none.
func gatherSum(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			found = true
			sum += m.GetGauge().GetValue()
		}
	}
	if !found {
		return -1
	}
	return sum
}
