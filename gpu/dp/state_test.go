package dp

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/gpu"
)

// saveCheckpoint writes weights (dtype) and the optimizer state of be into dir.
func saveCheckpoint(t *testing.T, be gpu.Backend, dir string, dtype gpu.DType) {
	t.Helper()
	if err := be.Save(dir, dtype); err != nil {
		t.Fatal(err)
	}
	if err := be.(gpu.OptimizerStateSaver).SaveOptimizerState(dir); err != nil {
		t.Fatal(err)
	}
}

// resumeGroup builds an n-rank group from dir's weights and loads its optimizer state.
func resumeGroup(t *testing.T, dir string, n int, opts ...Options) *Group {
	t.Helper()
	w, err := gpu.LoadWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	g := newGroup(t, w, n, opts...)
	if err := g.LoadOptimizerState(dir); err != nil {
		t.Fatal(err)
	}
	return g
}

func bitEqual(a, b *gpu.Weights) bool {
	for _, s := range gpu.ParamSpecs(a.Config) {
		x, y := a.Tensors[s.Name], b.Tensors[s.Name]
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
	}
	return true
}

// TestResumeFromShards: train one step on N ranks, checkpoint (bfloat16 weights + sharded
// optimizer state), resume on M ranks and take step two. Same M: bit for bit the uninterrupted
// run. Different M: the uninterrupted run within float tolerance (only the reduction order
// differs), which shows moments, step count and fp32 masters were re-sliced correctly.
func TestResumeFromShards(t *testing.T) {
	cfg := gpu.TinyConfig()
	w0, _ := gpu.NewRandomWeights(cfg, 21)
	s1, s2 := makeStep(31, cfg, 5), makeStep(32, cfg, 6)
	for _, tc := range []struct {
		from, to   int
		fromP, toP bool // parameter sharding before and after the restart
	}{{2, 2, false, false}, {3, 3, true, true}, {2, 3, false, false}, {4, 2, false, true}, {3, 1, true, false}, {1, 4, false, false}} {
		t.Run(fmt.Sprintf("%dto%d/params=%v,%v", tc.from, tc.to, tc.fromP, tc.toP), func(t *testing.T) {
			ref := newGroup(t, w0, tc.from, Options{ShardParameters: tc.fromP})
			stepGroup(t, ref, s1)
			dir := filepath.Join(t.TempDir(), "v1")
			saveCheckpoint(t, ref, dir, gpu.BF16)
			want := newGroup(t, w0, tc.to, Options{ShardParameters: tc.toP}) // the uninterrupted run at the resumed size
			stepGroup(t, want, s1)
			lw, nw := stepGroup(t, want, s2)

			got := resumeGroup(t, dir, tc.to, Options{ShardParameters: tc.toP})
			lg, ng := stepGroup(t, got, s2)
			if tc.from == tc.to {
				if lw != lg || nw != ng || !bitEqual(weightsOf(t, want), weightsOf(t, got)) {
					t.Fatalf("same world size: resumed step differs (loss %v/%v norm %v/%v)", lw, lg, nw, ng)
				}
				return
			}
			if !near(lw, lg, 1e-5) || !near(nw, ng, 1e-5) {
				t.Fatalf("loss %v/%v norm %v/%v", lw, lg, nw, ng)
			}
			if d, where := maxDiff(weightsOf(t, want), weightsOf(t, got)); d > 2e-6 {
				t.Fatalf("weights differ by %g at %s", d, where)
			}
		})
	}
}

// TestResumeFromUnshardedState: a one-GPU checkpoint (gpu.OptimizerStateFile by tensor name)
// continues on three ranks.
func TestResumeFromUnshardedState(t *testing.T) {
	cfg := gpu.TinyConfig()
	w0, _ := gpu.NewRandomWeights(cfg, 22)
	s1, s2 := makeStep(41, cfg, 4), makeStep(42, cfg, 5)
	one := newCPU(t, w0)
	stepOne(t, one, s1)
	dir := filepath.Join(t.TempDir(), "v1")
	saveCheckpoint(t, one, dir, gpu.BF16)
	l1, n1 := stepOne(t, one, s2)

	g := resumeGroup(t, dir, 3)
	lg, ng := stepGroup(t, g, s2)
	if !near(l1, lg, 1e-5) || !near(n1, ng, 1e-5) {
		t.Fatalf("loss %v/%v norm %v/%v", l1, lg, n1, ng)
	}
	if d, where := maxDiff(weightsOf(t, one), weightsOf(t, g)); d > 2e-6 {
		t.Fatalf("weights differ by %g at %s", d, where)
	}
	// The reverse is refused by the plain backend with an error naming its missing file.
	sdir := filepath.Join(t.TempDir(), "v2")
	saveCheckpoint(t, g, sdir, gpu.F32)
	plain := newCPU(t, w0)
	if err := plain.LoadOptimizerState(sdir); err == nil || !strings.Contains(err.Error(), gpu.OptimizerStateFile) {
		t.Fatalf("plain backend loading shards: %v", err)
	}
}

func TestLoadShardErrors(t *testing.T) {
	cfg := gpu.TinyConfig()
	w0, _ := gpu.NewRandomWeights(cfg, 23)
	g := newGroup(t, w0, 3)
	stepGroup(t, g, makeStep(51, cfg, 4))
	base := filepath.Join(t.TempDir(), "base")
	saveCheckpoint(t, g, base, gpu.F32)
	other := newGroup(t, w0, 2)
	odir := filepath.Join(t.TempDir(), "other")
	saveCheckpoint(t, other, odir, gpu.F32)

	copyDir := func(t *testing.T) string {
		dst := filepath.Join(t.TempDir(), "ck")
		if err := os.CopyFS(dst, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	for _, tc := range []struct {
		name, want string
		edit       func(t *testing.T, dir string)
	}{
		{"missing shard", "missing", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, ShardFile(1, 3))) }},
		{"mixed worlds", "mixed shard sets", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(odir, ShardFile(0, 2)))
			os.WriteFile(filepath.Join(dir, ShardFile(0, 2)), b, 0o644)
		}},
		{"truncated", "safetensors", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ShardFile(2, 3))
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}},
		{"no state", "neither", func(t *testing.T, dir string) {
			for r := range 3 {
				os.Remove(filepath.Join(dir, ShardFile(r, 3)))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t)
			tc.edit(t, dir)
			fresh := newGroup(t, w0, 2)
			before := weightsOf(t, fresh)
			err := fresh.LoadOptimizerState(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
			if !bitEqual(before, weightsOf(t, fresh)) {
				t.Fatal("a failed load changed the weights")
			}
		})
	}
}
