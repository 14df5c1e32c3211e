package topology

import (
	"os"
	"path/filepath"
	"testing"

	"tau2rl/trainer/checkpoint"
)

// TestOpenStartFreshContinuesNumbering: with only an unreadable checkpoint (v3, an empty
// trainer_state.json) and checkpoint.start_fresh, Open starts from random weights but hands back
// version and step 3, so the trainer's next version is 4 rather than 1 (producers drop requests
// below the highest version they have seen; issue 27 item 1). With an empty directory it hands
// back nothing.
func TestOpenStartFreshContinuesNumbering(t *testing.T) {
	dir := t.TempDir()
	s := Settings{Backend: "cpu", CheckpointDir: dir, Keep: 2, StartFresh: true}
	be, st, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	be.Close()
	if st != nil {
		t.Fatalf("empty checkpoint dir: resume %+v, want nil", st)
	}
	v3 := filepath.Join(dir, "v3")
	if err := os.MkdirAll(v3, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v3, checkpoint.StateFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	be, st, err = Open(s)
	if err != nil {
		t.Fatal(err)
	}
	be.Close()
	if st == nil || st.Version != 3 || st.Step != 3 || len(st.Offsets) != 0 || len(st.Admission) != 0 {
		t.Fatalf("start_fresh past unreadable v3: resume %+v, want version and step 3 only", st)
	}
}
