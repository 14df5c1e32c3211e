package goldgen

import (
	"slices"
	"testing"

	"tau2rl/tau2/pyjson"
)

func TestHelpers(t *testing.T) {
	if got := withThousandsSeparators([]string{"1628", "327", "23553", "1234567", "12a45"}); !slices.Equal(got, []string{"1,628", "327", "23,553", "1,234,567", "12a45"}) {
		t.Errorf("thousands: %v", got)
	}
	if a, b := RunID("airline", "1", Gold, 0), RunID("airline", "1", Gold, 0); a != b || len(a) != 36 {
		t.Errorf("RunID %q %q", a, b)
	}
	if RunID("airline", "1", Gold, 0) == RunID("airline", "1", Gold, 1) {
		t.Error("RunID ignores the trial")
	}
	args := pyjson.NewObject("n", int64(2), "s", "x")
	got, ok := changedArgs(args)
	if !ok || pyjson.MustDumps(got) != `{"n": 3, "s": "x"}` || pyjson.MustDumps(args) != `{"n": 2, "s": "x"}` {
		t.Errorf("changedArgs: %s %v (input %s)", pyjson.MustDumps(got), ok, pyjson.MustDumps(args))
	}
	if _, ok := changedArgs(pyjson.NewObject("l", []any{})); ok {
		t.Error("changedArgs changed a list")
	}
}
