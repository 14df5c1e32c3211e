package rollout

import (
	"testing"

	"tau2rl/lib/uuid"
	"tau2rl/schemas"
)

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
