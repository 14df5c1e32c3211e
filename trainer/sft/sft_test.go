package sft

import (
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/consumers/release"
	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/batch"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/prefixtree"
	"tau2rl/trainer/trajtest"
)

var quiet = slog.New(slog.DiscardHandler)

// archive writes 4 tasks × 4 episodes (rewards 1, 0, 1, 0) in the archiver's Hive layout, plus
// one duplicate of the first episode in a second file (an id re-published after a restart).
func archive(t *testing.T) (string, []*schemas.Trajectory) {
	t.Helper()
	root := t.TempDir()
	var all []*schemas.Trajectory
	for i, task := range []string{"0", "1", "2", "3"} {
		g, err := trajtest.Group(trajtest.Default(), task, uint64(i+1), trajtest.Rewards(4))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, g...)
	}
	dir := filepath.Join(root, "domain=airline", "date=2026-01-01")
	if err := dataset.WriteFile(filepath.Join(dir, "part-0.parquet"), all, schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	if err := dataset.WriteFile(filepath.Join(dir, "part-1.parquet"), all[:1], schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	return root, all
}

func testConfig(src, out string) Config {
	c := DefaultConfig()
	c.Dataset, c.Out = src, out
	c.Epochs = 4
	c.BatchTokens = 200
	c.Optimizer.LR = 3e-3
	c.Optimizer.WeightDecay = 0
	c.MBSpec = prefixtree.Config{MaxTokensPerMB: 512}
	c.DType = string(gpu.F32)
	return c
}

// meanNLL is the mean negative log-likelihood of trajs' completion tokens under be, computed
// without the trainer's packing (one plain chain per sequence): an independent check of what SFT
// optimised.
func meanNLL(t *testing.T, be gpu.Backend, trajs []*schemas.Trajectory) float64 {
	t.Helper()
	var sum float64
	var n int
	for _, tr := range trajs {
		d, err := batch.Demonstrate(tr, batch.ModeCall, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range d.Seqs {
			lp, _, err := be.LogProbs(gpu.Chain(s.Tokens))
			if err != nil {
				t.Fatal(err)
			}
			for i, on := range s.Loss {
				if on {
					sum -= float64(lp[i])
					n++
				}
			}
		}
	}
	return sum / float64(n)
}

func rewarded(all []*schemas.Trajectory, want float64) []*schemas.Trajectory {
	var out []*schemas.Trajectory
	for _, t := range all {
		if t.Reward == want {
			out = append(out, t)
		}
	}
	return out
}

// TestRejectionSamplingSFT trains on the rewarded half only (filter.min_reward=1): the likelihood
// of the rewarded completions rises well above that of the unrewarded ones, which were never
// trained on, and the checkpoint loads as a plain Hugging Face model.
func TestRejectionSamplingSFT(t *testing.T) {
	src, all := archive(t)
	out := filepath.Join(t.TempDir(), "sft")
	cfg := testConfig(src, out)
	one := 1.0
	cfg.Filter.MinReward = &one
	trajs, dups, err := Load(context.Background(), &cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if len(trajs) != 8 || dups != 1 {
		t.Fatalf("selected %d (duplicates %d), want the 8 rewarded episodes and 1 duplicate", len(trajs), dups)
	}
	be, err := cpu.NewRandom(gpu.TinyConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	good, bad := rewarded(all, 1), rewarded(all, 0)
	before := meanNLL(t, be, good)
	res, err := Run(context.Background(), cfg, be, trajs, 0, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps < 4 || res.LastLoss > res.FirstLoss-0.5 {
		t.Fatalf("%d steps, loss %.3f → %.3f: want ≥ 4 steps and a drop ≥ 0.5 nats", res.Steps, res.FirstLoss, res.LastLoss)
	}
	loaded, err := cpu.Load(res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	after, other := meanNLL(t, loaded, good), meanNLL(t, loaded, bad)
	t.Logf("NLL of rewarded completions %.3f → %.3f; unrewarded (not trained) %.3f", before, after, other)
	if after > before-0.5 || after > other-0.3 {
		t.Fatalf("NLL rewarded %.3f → %.3f, unrewarded %.3f: SFT did not learn the selected demonstrations", before, after, other)
	}
	st, err := checkpoint.ReadState(res.Checkpoint)
	if err != nil || st.Step != res.TotalSteps || st.Optimizer != checkpoint.OptimizerSaved {
		t.Fatalf("state %+v %v", st, err)
	}
	recs, err := steplog.Read(out)
	if err != nil || int64(len(recs)) != res.Steps || recs[0].Kind != "sft" || recs[0].Metrics["loss"] != res.FirstLoss {
		t.Fatalf("step log %+v %v", recs, err)
	}
}

// TestResumeIsExact stops after 3 steps and resumes: the weights equal an uninterrupted run's.
func TestResumeIsExact(t *testing.T) {
	src, _ := archive(t)
	run := func(out string, maxSteps int64, resume bool) *gpu.Weights {
		cfg := testConfig(src, out)
		cfg.Epochs = 2
		cfg.MaxSteps = maxSteps
		trajs, _, err := Load(context.Background(), &cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		var be *cpu.Backend
		var start int64
		if resume {
			m := &checkpoint.Manager{Dir: out, Keep: 2}
			dir, st, ok, _, err := m.Latest()
			if err != nil || !ok {
				t.Fatalf("no checkpoint to resume: %v", err)
			}
			if be, err = cpu.Load(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := m.LoadOptimizer(dir, st, be); err != nil {
				t.Fatal(err)
			}
			start = st.Step
		} else if be, err = cpu.NewRandom(gpu.TinyConfig(), 3); err != nil {
			t.Fatal(err)
		}
		if _, err := Run(context.Background(), cfg, be, trajs, start, quiet); err != nil {
			t.Fatal(err)
		}
		w, err := be.Weights()
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	full := run(filepath.Join(t.TempDir(), "a"), 0, false)
	out := filepath.Join(t.TempDir(), "b")
	run(out, 3, false)
	resumed := run(out, 0, true)
	for name, a := range full.Tensors {
		b := resumed.Tensors[name]
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s[%d]: uninterrupted %v, resumed %v", name, i, a[i], b[i])
			}
		}
	}
}

// TestFromRelease reads a release directly, after verifying it against its manifest; a release
// whose file was altered is refused.
func TestFromRelease(t *testing.T) {
	src, _ := archive(t)
	rel := filepath.Join(t.TempDir(), "rel")
	if _, err := release.Cut(context.Background(), release.Config{Source: src, Out: rel, Parquet: schemas.DefaultParquetWriterOptions()}, quiet); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(rel, filepath.Join(t.TempDir(), "sft"))
	trajs, dups, err := Load(context.Background(), &cfg, quiet)
	if err != nil || len(trajs) != 16 || dups != 0 {
		t.Fatalf("release: %d trajectories, %d duplicates, err %v", len(trajs), dups, err)
	}
	var victim string
	_ = filepath.Walk(rel, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			victim = p
		}
		return nil
	})
	f, err := os.OpenFile(victim, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	if _, _, err := Load(context.Background(), &cfg, quiet); err == nil || !strings.Contains(err.Error(), "manifest") {
		t.Fatalf("altered release: err %v", err)
	}
}

func TestValidate(t *testing.T) {
	base := func() Config { c := DefaultConfig(); c.Dataset, c.Out = "d", "o"; return c }
	lo, hi := 1.0, 0.0
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"ok", func(*Config) {}, ""},
		{"no dataset", func(c *Config) { c.Dataset = "" }, "dataset is required"},
		{"no out", func(c *Config) { c.Out = "" }, "out"},
		{"epochs", func(c *Config) { c.Epochs = 0 }, "epochs"},
		{"batch tokens", func(c *Config) { c.BatchTokens = 0 }, "batch_tokens"},
		{"mode", func(c *Config) { c.SequenceMode = "x" }, "sequence_mode"},
		{"dtype", func(c *Config) { c.DType = "int8" }, "dtype"},
		{"filter", func(c *Config) { c.Filter.MinReward, c.Filter.MaxReward = &lo, &hi }, "min_reward"},
		{"lr", func(c *Config) { c.Optimizer.LR = math.NaN() }, "lr"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base()
			c.edit(&cfg)
			err := cfg.Validate()
			if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}

func TestEmptySelection(t *testing.T) {
	src, _ := archive(t)
	cfg := testConfig(src, t.TempDir())
	cfg.Filter.Domains = []string{"retail"}
	if _, _, err := Load(context.Background(), &cfg, quiet); err == nil || !strings.Contains(err.Error(), "no trajectory") {
		t.Fatalf("err %v", err)
	}
}
