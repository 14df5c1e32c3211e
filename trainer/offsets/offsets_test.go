package offsets

import (
	"reflect"
	"testing"
)

func TestWatermark(t *testing.T) {
	tr := New()
	p0 := TopicPartition{Topic: "traj", Partition: 0}
	p1 := TopicPartition{Topic: "traj", Partition: 1}
	h5 := tr.Track(p0, 5, 1) // task A member, waits in an open group
	h6 := tr.Track(p0, 6, 2) // task B: two trajectories
	h7 := tr.Track(p0, 7, 1) // infra error
	h9 := tr.Track(p1, 9, 0) // dead-lettered: no trajectories, done at once
	if err := tr.Trained(h6, 1, "b1"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Trained(h6, 1, "b2"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Discard(h7); err != nil {
		t.Fatal(err)
	}
	_ = h9
	// Step 1 trained but not checkpointed yet: nothing on p0 may pass offset 5.
	targets, above := tr.Checkpointed(0)
	want := []Target{{Topic: "traj", Partition: 0, Next: 5}, {Topic: "traj", Partition: 1, Next: 10}}
	if !reflect.DeepEqual(targets, want) || len(above) != 0 {
		t.Fatalf("targets %v above %v", targets, above)
	}
	// Step 1 checkpointed: p0 still stops at 5 (A pending), and b1, b2 above it are reported.
	targets, above = tr.Checkpointed(1)
	if !reflect.DeepEqual(targets, want) || !reflect.DeepEqual(above, []string{"b1", "b2"}) {
		t.Fatalf("targets %v above %v", targets, above)
	}
	// A trained in step 2: after its checkpoint the whole partition is committable.
	if err := tr.Trained(h5, 2, "a1"); err != nil {
		t.Fatal(err)
	}
	targets, _ = tr.Checkpointed(1)
	if targets[0].Next != 5 {
		t.Fatalf("committed past a step that is not checkpointed: %v", targets)
	}
	targets, above = tr.Checkpointed(2)
	if !reflect.DeepEqual(targets, []Target{{Topic: "traj", Partition: 0, Next: 8}, {Topic: "traj", Partition: 1, Next: 10}}) || len(above) != 0 || tr.Pending() != 0 {
		t.Fatalf("targets %v above %v pending %d", targets, above, tr.Pending())
	}
}

func TestRedeliveryAndErrors(t *testing.T) {
	tr := New()
	p := TopicPartition{Topic: "traj", Partition: 3}
	h := tr.Track(p, 10, 1)
	if dup := tr.Track(p, 10, 1); dup != 0 {
		t.Fatalf("redelivered offset got handle %d", dup)
	}
	if dup := tr.Track(p, 4, 1); dup != 0 {
		t.Fatal("older offset tracked")
	}
	if err := tr.Discard(0); err != nil {
		t.Fatalf("zero handle: %v", err)
	}
	if err := tr.Discard(h); err != nil {
		t.Fatal(err)
	}
	if err := tr.Discard(h); err == nil {
		t.Fatal("over-resolution accepted")
	}
	if err := tr.Discard(99); err == nil {
		t.Fatal("unknown handle accepted")
	}
	targets, _ := tr.Checkpointed(0)
	if targets[0].Next != 11 {
		t.Fatalf("targets %v", targets)
	}
	if err := tr.Discard(h); err == nil {
		t.Fatal("handle of a committed message still accepted")
	}
}
