package step

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/trainer/checkpoint"
)

// TestResumeAnnouncesItsVersion: a trainer resumed from checkpoint vN reloads the servers with vN
// and publishes vN before it takes a step. Before, nothing was announced until the next
// checkpoint: when the previous process had died between saving and announcing vN, or its
// reload had failed, producers kept tagging episodes with the older version and the resumed
// trainer dropped every one as stale, never stepping again.
func TestResumeAnnouncesItsVersion(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 1
	src := newMemSource(groupMessages(t, []string{"a", "b"}, 0, 0))
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: src})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr) // v1 saved; no reloader, no versions topic: never announced
	dir, st, ok, _, err := (&checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: 2}).Latest()
	if err != nil || !ok || st.Version != 1 {
		t.Fatalf("checkpoint %v %v %v", st.Version, ok, err)
	}

	be, err := cpu.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	cfg.MaxSteps = 5 // no messages arrive: no step, only the announcement
	tr2, err := New(cfg, Deps{Backend: be, Source: newMemSource(nil), Reloader: rec, Versions: rec})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr2.Restore(st); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := tr2.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.reloads, []int64{1}) || len(rec.paths) != 1 || rec.paths[0] != dir {
		t.Fatalf("reloads %v of %v, want v1 of %s once", rec.reloads, rec.paths, dir)
	}
	if len(rec.versions) != 1 || rec.versions[0].Version != 1 || rec.versions[0].CheckpointPath != dir {
		t.Fatalf("published %+v, want version 1 at %s", rec.versions, dir)
	}
}

// TestRestartBeforeFirstStep: a fresh trainer without model.path writes its initial weights to
// checkpoint.dir/initial for the servers, which is not a checkpoint: restarted before its first
// step it starts fresh again (nothing to resume), rewrites them and announces version 0 again;
// checkpoint.dir holds no v<N>. A trainer resumed from a v0 checkpoint (written by hand or by
// another tool) announces v0, whose weights its backend holds, not model.path's.
func TestRestartBeforeFirstStep(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 5
	run := func(tr *Trainer) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := tr.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	initial := filepath.Join(cfg.Checkpoint.Dir, InitialDir)
	for i := range 2 {
		rec := &recorder{}
		tr, err := New(cfg, Deps{Backend: newBackend(t), Source: newMemSource(nil), Reloader: rec, Versions: rec})
		if err != nil {
			t.Fatal(err)
		}
		run(tr) // no messages: only the initial weights, written and announced
		rec.mu.Lock()
		if !slices.Equal(rec.reloads, []int64{0}) || !slices.Equal(rec.paths, []string{initial}) || len(rec.versions) != 1 || rec.versions[0].CheckpointPath != initial {
			t.Errorf("start %d: reloads %v of %v, published %+v; want v0 of %s once", i+1, rec.reloads, rec.paths, rec.versions, initial)
		}
		rec.mu.Unlock()
		if _, _, ok, _, err := (&checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: 2}).Latest(); ok || err != nil {
			t.Fatalf("start %d: a checkpoint to resume from (%v): the initial weights are not one", i+1, err)
		}
		ents, err := os.ReadDir(cfg.Checkpoint.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 || ents[0].Name() != InitialDir {
			t.Fatalf("start %d: checkpoint.dir holds %v, want only %s", i+1, ents, InitialDir)
		}
	}

	m := &checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: 2}
	be := newBackend(t)
	dir, err := m.SaveBackend(checkpoint.State{Version: 0, Step: 0}, be, gpu.F32)
	if err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	tr, err := New(cfg, Deps{Backend: be, Source: newMemSource(nil), Reloader: rec, Versions: rec, InitialWeights: initial})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Restore(st); err != nil {
		t.Fatal(err)
	}
	run(tr)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.reloads, []int64{0}) || !slices.Equal(rec.paths, []string{dir}) {
		t.Errorf("resumed from v0: reloads %v of %v, want v0 of %s", rec.reloads, rec.paths, dir)
	}
}
