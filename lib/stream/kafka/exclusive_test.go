package kafka_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
)

// TestExclusiveGroupNeverSplitsAcrossOwners: two members of one exclusive group with different
// owners (two archivers writing different directories, issue 27 item 4). Every partition goes to
// the owner that started first; the other owner's member gets nothing even while both are in the
// group, and GroupMembers shows both owners so the later one can stop with an error. With a plain
// group the second member would take half the partitions.
func TestExclusiveGroupNeverSplitsAcrossOwners(t *testing.T) {
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 60*time.Second)
	topic := cfg.Topics.Trajectories
	if err := tkafka.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	const group = "exclusive"
	first := tkafka.Owner{ID: "dataset-a", Start: time.Unix(100, 0)}
	second := tkafka.Owner{ID: "dataset-b", Start: time.Unix(200, 0)}
	// The later owner joins first: being in the group first does not win it.
	b, err := tkafka.NewExclusiveGroupReader(cfg, group, []string{topic}, nil, second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := tkafka.NewExclusiveGroupReader(cfg, group, []string{topic}, nil, first)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	admin, err := tkafka.NewAdmin(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ms, err := admin.GroupMembers(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		owners := map[string]bool{}
		for _, m := range ms {
			if m.HasOwner {
				owners[m.Owner.ID] = true
			}
		}
		if owners[first.ID] && owners[second.ID] {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("group members %+v never showed both owners", ms)
		case <-time.After(100 * time.Millisecond):
		}
	}
	const n = 60
	writeN(t, ctx, cfg, topic, "m", n)
	parts := map[int]bool{}
	for i := 0; i < n; i++ {
		m, err := a.Fetch(ctx)
		if err != nil {
			t.Fatalf("first owner fetched %d of %d: %v", i, n, err)
		}
		parts[m.Partition] = true
	}
	if len(parts) < 2 {
		t.Fatalf("messages landed in %d partitions; the test needs several", len(parts))
	}
	fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if m, err := b.Fetch(fctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the second owner's member fetched %s/%d@%d (err %v); it must get no partition", m.Topic, m.Partition, m.Offset, err)
	}
	if w, _ := tkafka.ExclusiveWinner([]tkafka.Owner{second, first}); w.ID != first.ID {
		t.Fatalf("winner %v, want the earliest owner", w)
	}
}
