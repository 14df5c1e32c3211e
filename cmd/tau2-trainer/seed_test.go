package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/trajtest"
)

// TestSFTSeeds: the two seed keys of `tau2-trainer sft` — seed (each epoch's shuffle) and
// model.seed (the random initialisation of model.config) — each change the trained weights, and
// two runs with the same values write the same model.safetensors byte for byte (the pure-Go
// backend is deterministic). A cosine schedule set on the command line reaches steps.jsonl.
func TestSFTSeeds(t *testing.T) {
	var all []*schemas.Trajectory
	for i, task := range []string{"0", "1", "2", "3"} {
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
	train := func(seed, modelSeed int) (string, []byte) {
		out := filepath.Join(t.TempDir(), "sft")
		text, err := executeSFT(t, "dataset="+src, "out="+out, "epochs=1", "batch_tokens=150", "optimizer.lr=1e-3",
			"optimizer.lr_schedule=cosine", "optimizer.warmup_steps=1", "dtype=float32", "mb_spec.max_tokens_per_mb=512",
			fmt.Sprintf("seed=%d", seed), fmt.Sprintf("model.seed=%d", modelSeed))
		if err != nil {
			t.Fatalf("seed %d model.seed %d: %v\n%s", seed, modelSeed, err, text)
		}
		m := &checkpoint.Manager{Dir: out, Keep: 2}
		dir, _, ok, _, err := m.Latest()
		if err != nil || !ok {
			t.Fatalf("no checkpoint in %s: %v", out, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return out, b
	}
	out, base := train(1, 1)
	if _, again := train(1, 1); !bytes.Equal(base, again) {
		t.Fatal("two runs with seed=1 model.seed=1 wrote different weights")
	}
	if _, other := train(2, 1); bytes.Equal(base, other) {
		t.Error("seed=2 wrote the weights of seed=1")
	}
	if _, other := train(1, 2); bytes.Equal(base, other) {
		t.Error("model.seed=2 wrote the weights of model.seed=1")
	}
	recs, err := steplog.Read(out)
	if err != nil || len(recs) < 3 {
		t.Fatalf("step log: %d records, %v", len(recs), err)
	}
	if recs[0].Metrics["lr"] != 1e-3 || !(recs[len(recs)-1].Metrics["lr"] < 1e-3) {
		var lrs []string
		for _, r := range recs {
			lrs = append(lrs, fmt.Sprint(r.Metrics["lr"]))
		}
		t.Errorf("lr per step %s: want a warm-up to 1e-3, then a decay", strings.Join(lrs, ", "))
	}
}
