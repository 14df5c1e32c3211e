package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/trajtest"

	"tau2rl/cmd/internal/cli"
)

func executeSFT(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cfg := DefaultSFTConfig()
	var help, out bytes.Buffer
	err := cli.Execute(context.Background(), cli.App{Name: "tau2-trainer sft", Usage: sftUsage},
		append([]string{"--metrics-addr", "off", "--log-level", "warn", "model.config=" + tinyModel(t)}, args...), &cfg, &help,
		func(ctx context.Context, rt *cli.Runtime) error { return runSFT(ctx, rt, &cfg, &out) })
	return help.String() + out.String(), err
}

// TestSFTCommand runs `tau2-trainer sft` on a dataset the test writes: rejection sampling
// (filter.min_reward=1) over two epochs, a checkpoint the GRPO trainer's format, and a second
// invocation that finds the run complete.
func TestSFTCommand(t *testing.T) {
	var all []*schemas.Trajectory
	for i, task := range []string{"0", "1", "2"} {
		g, err := trajtest.Group(trajtest.Default(), task, uint64(i+1), trajtest.Rewards(4))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, g...)
	}
	src := t.TempDir()
	if err := dataset.WriteFile(filepath.Join(src, "domain=airline", "part-0.parquet"), all, schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sft")
	args := []string{"dataset=" + src, "out=" + out, "filter.min_reward=1", "filter.domains=[airline]", "epochs=2",
		"batch_tokens=150", "optimizer.lr=1e-3", "dtype=float32", "mb_spec.max_tokens_per_mb=512"}
	text, err := executeSFT(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "sft: 6 trajectories") || !strings.Contains(text, filepath.Join(out, "v")) {
		t.Fatalf("summary %q", text)
	}
	m := &checkpoint.Manager{Dir: out, Keep: 2}
	dir, st, ok, _, err := m.Latest()
	if err != nil || !ok || st.Optimizer != checkpoint.OptimizerSaved || st.Step < 2 {
		t.Fatalf("checkpoint %s %+v %v %v", dir, st, ok, err)
	}
	text, err = executeSFT(t, args...)
	if err != nil || !strings.Contains(text, fmt.Sprintf("0 steps (%d in total)", st.Step)) {
		t.Fatalf("second run: %q %v", text, err)
	}
}

func TestSFTUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"out=x"}, "dataset is required"},
		{[]string{"dataset=x"}, "out"},
		{[]string{"dataset=x", "out=y", "epochs=0"}, "epochs"},
		{[]string{"dataset=x", "out=y", "backend=tpu"}, "not available"},
		{[]string{"dataset=x", "out=y", "no_such_key=1"}, "no_such_key"},
	} {
		_, err := executeSFT(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.args, err, c.want)
		}
	}
	if text, _ := executeSFT(t, "--help"); !strings.Contains(text, "filter.min_reward=1") || !strings.Contains(text, "batch_tokens") {
		t.Fatalf("help %q", text)
	}
}
