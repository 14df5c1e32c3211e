package step

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

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

// TestRestartAfterInitialCheckpoint: a fresh trainer without model.path writes checkpoint v0 for
// the servers; restarted before its first step, it resumes from v0 and announces it again, as
// from any checkpoint, instead of writing v0 once more over the one it resumed from.
func TestRestartAfterInitialCheckpoint(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 5
	run := func(tr *Trainer) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := tr.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: newMemSource(nil), Reloader: rec, Versions: rec})
	if err != nil {
		t.Fatal(err)
	}
	run(tr) // no messages: only v0, written and announced
	m := &checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: 2}
	dir, st, ok, _, err := m.Latest()
	if err != nil || !ok || st.Version != 0 || st.Step != 0 {
		t.Fatalf("checkpoint %s %+v %v %v, want v0", dir, st, ok, err)
	}
	be, err := cpu.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec2 := &recorder{}
	tr2, err := New(cfg, Deps{Backend: be, Source: newMemSource(nil), Reloader: rec2, Versions: rec2})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr2.Restore(st); err != nil {
		t.Fatal(err)
	}
	run(tr2)
	for i, r := range []*recorder{rec, rec2} {
		r.mu.Lock()
		if !slices.Equal(r.reloads, []int64{0}) || !slices.Equal(r.paths, []string{dir}) || len(r.versions) != 1 || r.versions[0].CheckpointPath != dir {
			t.Errorf("run %d: reloads %v of %v, published %+v; want v0 of %s once", i+1, r.reloads, r.paths, r.versions, dir)
		}
		r.mu.Unlock()
	}
	ents, err := os.ReadDir(cfg.Checkpoint.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "v0" && e.IsDir() {
			t.Errorf("checkpoint.dir holds %s besides v0 (the resumed v0 set aside and written again?)", e.Name())
		}
	}
}
