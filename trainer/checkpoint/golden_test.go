package checkpoint

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tau2rl/trainer/offsets"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// TestStateGolden pins the on-disk format of trainer_state.json: a change to it must be deliberate
// (go test -update, and a FormatVersion bump when old readers would misread it) because restarted
// trainers read files written by older ones. Format 2 added "optimizer" and "optimizer_note".
func TestStateGolden(t *testing.T) {
	m := &Manager{Dir: t.TempDir(), Keep: 1}
	st := State{
		Version: 12, Step: 12, Time: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), Optimizer: OptimizerSaved,
		Offsets:      []offsets.Target{{Topic: "tau2.trajectories", Partition: 0, Next: 1200}, {Topic: "tau2.trajectories", Partition: 1, Next: 977}},
		TrainedAbove: []string{"4b6f2a7e-0c5d-4a8b-9f1e-2d3c4b5a6978"},
		Admission:    []byte(`{"issued":208,"live":[]}`),
		Metrics:      map[string]float64{"loss": -0.0125, "tree_token_ratio": 0.152},
	}
	dir, err := m.Save(st, writeModelAndOptimizer)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "trainer_state.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("trainer_state.json changed:\n%s\nwant:\n%s", got, want)
	}
	back, err := ParseState(want)
	if err != nil || back.Version != 12 || back.Offsets[1].Next != 977 {
		t.Fatalf("golden does not parse back: %+v %v", back, err)
	}
}

// TestStateGoldenV1 keeps format 1 files (written before the optimizer state was saved) readable:
// a trainer upgraded in place must resume from its last checkpoint.
func TestStateGoldenV1(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "trainer_state.v1.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseState(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Format != 1 || st.Version != 12 || st.Offsets[0].Next != 1200 || st.Optimizer != OptimizerNotSaved {
		t.Fatalf("format 1 golden read as %+v", st)
	}
}
