package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/trainer/trajtest"

	"tau2rl/cmd/internal/cli"
	"tau2rl/cmd/internal/clitest"
)

// tinyModel writes gpu.TinyConfig (64 token ids, the synthetic trajectories' vocabulary) as a
// config.json for model.config and returns its path.
func tinyModel(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(gpu.TinyConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestModelIsRequired (issue 27 item 13): without model.path or model.config the trainer and
// `sft` stop at configuration time with exit status 2 and say what to set, instead of training
// random weights of a 64-token shape that fails on the first real trajectory.
func TestModelIsRequired(t *testing.T) {
	noRun := func(context.Context, *cli.Runtime) error { t.Error("run called"); return nil }
	for name, c := range map[string]struct {
		cfg  any
		args []string
	}{
		"trainer": {func() any { c := DefaultConfig(); return &c }(), []string{"admission.enabled=false"}},
		"sft":     {func() any { c := DefaultSFTConfig(); return &c }(), []string{"dataset=d", "out=o"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := cli.Execute(context.Background(), cli.App{Name: name}, c.args, c.cfg, &strings.Builder{}, noRun)
			if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "model.path or model.config: required") ||
				!strings.Contains(err.Error(), "deploy/models/qwen3-tiny/config.json") {
				t.Fatalf("exit %d: %v", cli.ExitCode(err), err)
			}
		})
	}
}

// TestSFTRefusesTokensOutsideTheVocabulary (issue 27 item 13): a dataset tokenized with Qwen3's
// vocabulary (ids up to 151935) against a model with a smaller one fails before the first step,
// with exit status 2, the offending id, the vocabulary and what to set — not with the backend's
// "outside vocabulary" at step 1.
func TestSFTRefusesTokensOutsideTheVocabulary(t *testing.T) {
	o := trajtest.Default()
	o.Vocab = 151936 // Qwen3's
	var all []*schemas.Trajectory
	for i, task := range []string{"0", "1"} {
		g, err := trajtest.Group(o, task, uint64(i+1), trajtest.Rewards(4))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, g...)
	}
	// The special token the run stopped on: <|im_start|>.
	all[0].Calls[0].PromptTokens[0] = 151644
	src := t.TempDir()
	if err := dataset.WriteFile(filepath.Join(src, "domain=airline", "part-0.parquet"), all, schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sft")
	_, err := executeSFT(t, "dataset="+src, "out="+out, "dtype=float32")
	if cli.ExitCode(err) != 2 {
		t.Fatalf("exit %d, want 2: %v", cli.ExitCode(err), err)
	}
	for _, want := range []string{"outside the model's vocabulary [0,64)", "model.config=", "Qwen3's has 151936"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := os.Stat(out); err == nil {
		if ents, _ := os.ReadDir(out); len(ents) > 0 {
			t.Errorf("a checkpoint was written before the check: %v", ents)
		}
	}
}

// TestPrintConfigAlone (issue 27 item 19): `tau2-trainer --print-config` and
// `tau2-trainer sft --print-config` print the defaults and list what is still to set (exit 0).
func TestPrintConfigAlone(t *testing.T) {
	dataDir := t.TempDir()
	os.MkdirAll(filepath.Join(dataDir, "tau2", "domains"), 0o755)
	t.Setenv("TAU2_DATA_DIR", dataDir)
	clitest.PrintConfigAlone(t, func() any { c := DefaultConfig(); return &c }(), "model.path or model.config: required")
	clitest.PrintConfigAlone(t, func() any { c := DefaultSFTConfig(); return &c }(),
		"sft: dataset is required", "model.path or model.config: required")
}
