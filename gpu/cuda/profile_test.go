//go:build cuda

package cuda

import (
	"math/rand/v2"
	"testing"

	"tau2rl/gpu"
)

// TestProfile checks the per-operation profiler: with it on, a training step reports every layer
// operation once per layer under its layer-free name, with positive device times; the numbers the
// step computes are those of an unprofiled step; turning it off forgets the totals.
func TestProfile(t *testing.T) {
	cfg := smallConfig()
	w := testWeights(t, cfg, 7)
	rng := rand.New(rand.NewPCG(7, 7))
	seqs := groupSequences(rng, cfg.VocabSize, 2, 3, 12, 5)
	p := buildTree(seqs)
	dl := p.dlogp(seqWeights(rng, seqs))
	plain := newBackend(t, w, DefaultOptions())
	want := cudaFB(t, plain, p.mb, dl)

	b := newBackend(t, w, DefaultOptions())
	if got := b.Profile(); got != nil {
		t.Fatalf("Profile with profiling off = %v, want nil", got)
	}
	if err := b.SetProfiling(true); err != nil {
		t.Fatal(err)
	}
	got := cudaFB(t, b, p.mb, dl)
	if _, err := b.Step(gpu.DefaultOptimizer()); err != nil {
		t.Fatal(err)
	}
	if e := relErr(got.logp, want.logp); e != 0 {
		t.Errorf("profiled log-probs differ from unprofiled: rel err %g", e)
	}
	ops := map[string]OpTime{}
	for _, op := range b.Profile() {
		ops[op.Op] = op
		if op.MS <= 0 {
			t.Errorf("%s: %g ms, want > 0", op.Op, op.MS)
		}
	}
	L := cfg.NumHiddenLayers
	for op, calls := range map[string]int{
		"qkv_proj": L, "attention": L, "attention backward": L, "down_proj weight backward": L,
		"embedding": 1, "final norm backward": 1, "gradient norm": 1, "adamw": 1,
	} {
		if ops[op].Calls != calls {
			t.Errorf("%s: %d calls, want %d (profile %v)", op, ops[op].Calls, calls, b.Profile())
		}
	}
	if err := b.SetProfiling(false); err != nil {
		t.Fatal(err)
	}
	if got := b.Profile(); got != nil {
		t.Errorf("Profile after SetProfiling(false) = %v, want nil", got)
	}
}
