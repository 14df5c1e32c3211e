package rollout

import (
	"testing"

	"tau2rl/lib/uuid"
	"tau2rl/schemas"
)

func TestOffsetTrackerCommitsContiguously(t *testing.T) {
	tr := newOffsetTracker()
	a := tr.add("t", 0, 10)
	b := tr.add("t", 0, 11)
	c := tr.add("t", 0, 12)
	other := tr.add("t", 1, 5)
	if _, ok := tr.done(b); ok {
		t.Fatal("committable before 10 is done")
	}
	if off, ok := tr.done(a); !ok || off != 11 {
		t.Fatalf("after 10 and 11: %d %v, want 11", off, ok)
	}
	if off, ok := tr.done(other); !ok || off != 5 {
		t.Fatalf("partition 1: %d %v", off, ok)
	}
	if off, ok := tr.done(c); !ok || off != 12 {
		t.Fatalf("after 12: %d %v", off, ok)
	}
	if tr.pending() != 0 {
		t.Fatalf("pending %d", tr.pending())
	}
	// A rebalance redelivers from 11: the old generation commits nothing.
	d := tr.add("t", 0, 13)
	e := tr.add("t", 0, 11)
	if _, ok := tr.done(d); ok {
		t.Fatal("stale generation committed")
	}
	if off, ok := tr.done(e); !ok || off != 11 {
		t.Fatalf("new generation: %d %v", off, ok)
	}
}

func TestStale(t *testing.T) {
	four := int64(4)
	for _, tc := range []struct {
		req    schemas.RolloutRequest
		latest int64
		maxOff int64
		stale  bool
	}{
		{schemas.RolloutRequest{PolicyVersion: 3}, 5, 2, false},
		{schemas.RolloutRequest{PolicyVersion: 2}, 5, 2, true},
		{schemas.RolloutRequest{PolicyVersion: 0}, 50, -1, false},
		{schemas.RolloutRequest{PolicyVersion: 4, StaleAfterVersion: &four}, 5, -1, true},
		{schemas.RolloutRequest{PolicyVersion: 4, StaleAfterVersion: &four}, 4, 0, false},
	} {
		if got := Stale(&tc.req, tc.latest, tc.maxOff) != ""; got != tc.stale {
			t.Errorf("%+v latest %d maxOff %d: stale %v", tc.req, tc.latest, tc.maxOff, got)
		}
	}
}

func TestVersionsOnlyRise(t *testing.T) {
	var vs Versions
	vs.Observe(3)
	vs.Observe(1)
	if vs.Latest() != 3 {
		t.Fatal(vs.Latest())
	}
}

func TestTrialSeedRange(t *testing.T) {
	for i := 0; i < 100; i++ {
		s := TrialSeed(uuid.New(), i)
		if s < 0 || s > 1_000_000 {
			t.Fatal(s)
		}
	}
	first, again, other := TrialSeed("r", 1), TrialSeed("r", 1), TrialSeed("r", 2)
	if first != again || first == other {
		t.Fatal("seeds not deterministic per request and trial")
	}
}
