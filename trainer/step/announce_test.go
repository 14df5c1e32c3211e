package step

import (
	"context"
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
