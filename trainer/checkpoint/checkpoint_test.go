package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/trainer/offsets"
)

// writeModel writes a tiny model's weights (config.json, model.safetensors): what Verify needs of a
// checkpoint without optimizer state.
func writeModel(dir string) error {
	w, err := gpu.NewRandomWeights(gpu.TinyConfig(), 7)
	if err != nil {
		return err
	}
	return w.Save(dir, gpu.F32)
}

func TestSaveLatestPrune(t *testing.T) {
	m := &Manager{Dir: t.TempDir(), Keep: 2}
	if _, _, ok, _, err := m.Latest(); ok || err != nil {
		t.Fatalf("empty dir: ok %v err %v", ok, err)
	}
	for v := int64(1); v <= 3; v++ {
		st := State{Version: v, Step: v, Time: time.Unix(v, 0).UTC(),
			Offsets: []offsets.Target{{Topic: "t", Partition: 0, Next: 10 * v}}, TrainedAbove: []string{"x"}}
		p, err := m.Save(st, writeModel)
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsAbs(p) || filepath.Base(p) != "v"+string(rune('0'+v)) {
			t.Fatalf("path %s", p)
		}
	}
	if _, err := os.Stat(m.Path(1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("v1 not pruned")
	}
	dir, st, ok, _, err := m.Latest()
	if err != nil || !ok || st.Version != 3 || st.Offsets[0].Next != 30 || filepath.Base(dir) != "v3" {
		t.Fatalf("latest %s %+v %v %v", dir, st, ok, err)
	}
	if _, err := gpu.LoadWeights(dir); err != nil {
		t.Fatalf("model files: %v", err)
	}
}

func TestLatestSkipsCorrupt(t *testing.T) {
	m := &Manager{Dir: t.TempDir(), Keep: 5}
	if _, err := m.Save(State{Version: 4}, writeModel); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Save(State{Version: 5}, writeModel); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(m.Path(5), StateFile), []byte("{not json"), 0o644)
	os.MkdirAll(filepath.Join(m.Dir, "v07"), 0o755)       // not canonical: ignored
	os.MkdirAll(filepath.Join(m.Dir, ".tmp-v6-1"), 0o755) // crashed save
	_, st, ok, skipped, err := m.Latest()
	if err != nil || !ok || st.Version != 4 || len(skipped) != 1 {
		t.Fatalf("latest %+v ok %v skipped %v err %v", st, ok, skipped, err)
	}
	if err := m.CleanTemp(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, ".tmp-v6-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("temp dir left")
	}
}

func TestSaveFailureLeavesNothing(t *testing.T) {
	m := &Manager{Dir: t.TempDir(), Keep: 2}
	_, err := m.Save(State{Version: 1}, func(string) error { return errors.New("disk full") })
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err %v", err)
	}
	ents, _ := os.ReadDir(m.Dir)
	if len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
}

func TestParseState(t *testing.T) {
	good := `{"format":1,"version":3,"step":3,"time":"2026-01-01T00:00:00Z","offsets":[{"topic":"t","partition":1,"next":5}]}`
	st, err := ParseState([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.Offsets, []offsets.Target{{Topic: "t", Partition: 1, Next: 5}}) {
		t.Fatalf("%+v", st)
	}
	v2 := `{"format":2,"version":3,"step":3,"optimizer":"saved","offsets":[]}`
	if st, err := ParseState([]byte(v2)); err != nil || st.Optimizer != OptimizerSaved {
		t.Fatalf("format 2: %+v %v", st, err)
	}
	if st.Optimizer != OptimizerNotSaved || st.OptimizerNote == "" {
		t.Fatalf("format 1 state read as optimizer %q note %q, want not_saved with a note", st.Optimizer, st.OptimizerNote)
	}
	for _, bad := range []string{
		`{"format":3,"version":1,"optimizer":"saved"}`,
		`{"format":2,"version":1}`,
		`{"format":2,"version":1,"optimizer":"partly"}`,
		`{"format":1,"version":1,"optimizer":"saved"}`,
		`{"format":0,"version":1}`,
		`{"format":1,"version":-1}`,
		`{"format":1,"version":1,"offsets":[{"topic":"","partition":0,"next":1}]}`,
		`{"format":1,"version":1,"surprise":true}`,
		`{"format":1,"version":1} {}`,
		`[]`,
	} {
		if _, err := ParseState([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// FuzzParseState: the state file is outside input after a crash; it must never panic.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"format":1,"version":3,"step":3,"offsets":[{"topic":"t","partition":1,"next":5}],"trained_above":["a"]}`))
	f.Add([]byte(`{"format":1,"admission":{"x":1}}`))
	f.Add([]byte(`{"format":2,"version":1,"optimizer":"not_saved","optimizer_note":"why"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseState(b)
		if err == nil && (st.Version < 0 || (st.Format != 1 && st.Format != FormatVersion) ||
			(st.Optimizer != OptimizerSaved && st.Optimizer != OptimizerNotSaved)) {
			t.Fatalf("accepted invalid state %+v", st)
		}
	})
}
