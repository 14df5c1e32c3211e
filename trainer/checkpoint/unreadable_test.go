package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/dp"
)

// exists reports whether path exists.
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestPruneKeepsReadableOverUnreadable reproduces issue 27 item 1: with checkpoint.keep=1 and an
// unreadable newest checkpoint (an empty trainer_state.json), every new checkpoint was pruned as
// soon as it was written, because the unreadable directory counted toward keep. Unreadable
// directories must not count, must not be deleted, and are reported once.
func TestPruneKeepsReadableOverUnreadable(t *testing.T) {
	var log bytes.Buffer
	m := &Manager{Dir: t.TempDir(), Keep: 1, Log: logTo(&log)}
	if _, err := m.Save(State{Version: 6, Step: 6, Optimizer: OptimizerSaved}, writeModelAndOptimizer); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Path(6), StateFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 3; v++ {
		if _, err := m.Save(State{Version: v, Step: v, Optimizer: OptimizerSaved}, writeModelAndOptimizer); err != nil {
			t.Fatal(err)
		}
		if !exists(t, m.Path(v)) {
			t.Fatalf("v%d, the only readable checkpoint, was pruned in favour of the unreadable v6", v)
		}
		if v > 1 && exists(t, m.Path(v-1)) {
			t.Fatalf("v%d beyond keep=1 readable checkpoints was not pruned", v-1)
		}
		if !exists(t, m.Path(6)) {
			t.Fatal("the unreadable v6 was deleted (it may be repairable)")
		}
	}
	if n := strings.Count(log.String(), "unreadable checkpoint"); n != 1 || !strings.Contains(log.String(), "v6") {
		t.Fatalf("unreadable v6 reported %d times, want once:\n%s", n, log.String())
	}
	_, st, ok, skipped, err := m.Latest()
	if err != nil || !ok || st.Version != 3 || len(skipped) != 1 {
		t.Fatalf("latest %+v ok %v skipped %v err %v", st, ok, skipped, err)
	}
}

// TestLatestFallsBack: a newest checkpoint broken in any of its parts (state, weights, optimizer
// state) is skipped for the newest fully readable one, with a reason that names what is wrong.
func TestLatestFallsBack(t *testing.T) {
	truncate := func(name string) func(string) error {
		return func(dir string) error {
			p := filepath.Join(dir, name)
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			return os.Truncate(p, fi.Size()/2)
		}
	}
	write := func(name, text string) func(string) error {
		return func(dir string) error { return os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644) }
	}
	remove := func(name string) func(string) error {
		return func(dir string) error { return os.Remove(filepath.Join(dir, name)) }
	}
	for _, c := range []struct {
		name   string
		damage func(dir string) error
		want   string
	}{
		{"empty state", write(StateFile, ""), "state"},
		{"state of another version", write(StateFile, `{"format":2,"version":4,"step":4,"optimizer":"saved","offsets":[]}`), "version 4"},
		{"no config", remove("config.json"), "config.json"},
		{"truncated weights", truncate("model.safetensors"), "model.safetensors"},
		{"empty weights", write("model.safetensors", ""), "model.safetensors"},
		{"missing weights", remove("model.safetensors"), "model.safetensors"},
		{"truncated optimizer", truncate(gpu.OptimizerStateFile), gpu.OptimizerStateFile},
		{"missing optimizer", remove(gpu.OptimizerStateFile), "optimizer"},
		{"one of two shards lost", func(dir string) error {
			if err := os.Rename(filepath.Join(dir, gpu.OptimizerStateFile), filepath.Join(dir, dp.ShardFile(0, 2))); err != nil {
				return err
			}
			return nil
		}, dp.ShardFile(1, 2)},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &Manager{Dir: t.TempDir(), Keep: 5}
			for v := int64(4); v <= 5; v++ {
				if _, err := m.Save(State{Version: v, Step: v, Optimizer: OptimizerSaved}, writeModelAndOptimizer); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := Verify(m.Path(5)); err != nil {
				t.Fatalf("intact checkpoint: %v", err)
			}
			if err := c.damage(m.Path(5)); err != nil {
				t.Fatal(err)
			}
			dir, st, ok, skipped, err := m.Latest()
			if err != nil || !ok || st.Version != 4 || filepath.Base(dir) != "v4" {
				t.Fatalf("latest %s %+v ok %v err %v, want v4", dir, st, ok, err)
			}
			if len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "v5") || !strings.Contains(skipped[0].Error(), c.want) {
				t.Fatalf("skipped %v, want v5 and %q", skipped, c.want)
			}
		})
	}
}

// TestResume: the start-up decision. No checkpoint: start from the model. Only unreadable ones:
// refuse (ErrNoReadable, naming them and checkpoint.start_fresh) unless startFresh, which continues
// the numbering after the highest unreadable version. A readable one
// behind an unreadable newer one: resume from it and say so. startFresh never skips a readable one.
func TestResume(t *testing.T) {
	var log bytes.Buffer
	m := &Manager{Dir: filepath.Join(t.TempDir(), "ckpt"), Keep: 3, Log: logTo(&log)}
	if _, _, found, err := m.Resume(false); found || err != nil {
		t.Fatalf("no checkpoint dir: found %v err %v", found, err)
	}
	if _, err := m.Save(State{Version: 6, Step: 6}, writeModel); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Path(6), StateFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, found, err := m.Resume(false)
	if found || !errors.Is(err, ErrNoReadable) {
		t.Fatalf("only an unreadable checkpoint: found %v err %v, want ErrNoReadable", found, err)
	}
	for _, want := range []string{m.Path(6), StateFile, "checkpoint.start_fresh=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}
	log.Reset()
	_, st, found, err := m.Resume(true)
	if found || err != nil || !strings.Contains(log.String(), "start_fresh") {
		t.Fatalf("start_fresh: found %v err %v log %q", found, err, log.String())
	}
	// The fresh run numbers on from v6: producers drop requests of a version below the highest
	// they have seen, so publishing version 1 after 6 would stall training (issue 27 item 1).
	if st.Version != 6 || st.Step != 6 || len(st.Offsets) != 0 {
		t.Fatalf("start_fresh state %+v, want version and step 6 and nothing else", st)
	}
	if !exists(t, m.Path(6)) {
		t.Fatal("start_fresh removed the unreadable checkpoint")
	}

	if _, err := m.Save(State{Version: 5, Step: 5}, writeModel); err != nil {
		t.Fatal(err)
	}
	for _, fresh := range []bool{false, true} {
		log.Reset()
		dir, st, found, err := m.Resume(fresh)
		if err != nil || !found || st.Version != 5 || filepath.Base(dir) != "v5" {
			t.Fatalf("start_fresh=%v: %s %+v found %v err %v, want v5", fresh, dir, st, found, err)
		}
		if !strings.Contains(log.String(), "falling back") || !strings.Contains(log.String(), "v6") {
			t.Fatalf("fallback not logged: %q", log.String())
		}
	}
}

// TestSaveSetsAsideUnreadableSameVersion: publishing v6 over an unreadable v6 (a trainer that fell
// back to v5 retrains v6) keeps the old directory under another name instead of deleting it.
func TestSaveSetsAsideUnreadableSameVersion(t *testing.T) {
	var log bytes.Buffer
	m := &Manager{Dir: t.TempDir(), Keep: 3, Log: logTo(&log)}
	if _, err := m.Save(State{Version: 6, Step: 6}, writeModel); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Path(6), StateFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Save(State{Version: 6, Step: 6}, writeModel); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(m.Path(6)); err != nil {
		t.Fatalf("new v6: %v", err)
	}
	aside, _ := filepath.Glob(m.Path(6) + ".unreadable-*")
	if len(aside) != 1 || !strings.Contains(log.String(), "set aside") {
		t.Fatalf("set aside %v, log %q", aside, log.String())
	}
	if b, err := os.ReadFile(filepath.Join(aside[0], StateFile)); err != nil || string(b) != "{" {
		t.Fatalf("the old v6 was not kept as it was: %q %v", b, err)
	}
	if vs, _ := m.versions(); len(vs) != 1 {
		t.Fatalf("versions %v: the set-aside directory must not be taken for a checkpoint", vs)
	}
}
