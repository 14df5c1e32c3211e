package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/cmd/internal/cli"
	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/gpu/sampler"
	"tau2rl/gpu/sampler/httpapi"
	"tau2rl/gpu/sampler/loadgen"
)

// TestBenchAgainstSampler runs the command's wiring against tau2-sampler's HTTP API on the tiny
// model and checks the summary and the JSON record it appends.
func TestBenchAgainstSampler(t *testing.T) {
	w, err := gpu.NewRandomWeightsWith(gpu.TinyConfig(), 5, gpu.InitOptions{Std: 0.5, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 512})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := sampler.New(dec, sampler.Config{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = eng.Run(context.Background()) }()
	srv := httptest.NewServer(httpapi.New(eng, httpapi.Options{}).Handler())
	t.Cleanup(func() { srv.Close(); eng.Close(); <-eng.Done() })

	dir := t.TempDir()
	modelDir := filepath.Join(dir, "tiny")
	if _, err := gpu.WriteRandomCheckpoint(modelDir, gpu.TinyConfig(), 1, gpu.InitOptions{}, gpu.BF16); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.URL, cfg.Model, cfg.Card, cfg.CopyGBs, cfg.MatmulTFLOPs = srv.URL, modelDir, "cpu", 100, 1
	cfg.Groups, cfg.Samples, cfg.Turns, cfg.Sys, cfg.Task, cfg.Gen, cfg.GenSD, cfg.Reply, cfg.Vocab = 2, 2, 2, 30, 5, 4, 1, 3, 64
	cfg.BlockSize, cfg.Out = 4, filepath.Join(dir, "runs.jsonl")
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), &cfg, stdout); err != nil {
		t.Fatal(err)
	}
	stdout.Close()
	text, _ := os.ReadFile(filepath.Join(dir, "stdout"))
	for _, want := range []string{"calls/s", "prefix-cache hits", "p50", "floor, shared prefixes read once", "floor, per-sequence KV reads"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	data, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	var rec loadgen.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("record %q: %v", data, err)
	}
	if rec.Groups != 2 || rec.Samples != 2 || rec.Turns != 2 || rec.OutputTokPerS <= 0 || rec.FloorTokPerSShared < rec.FloorTokPerSPerSeq || rec.Card != "cpu" {
		t.Fatalf("record %+v", rec)
	}
	// Usage errors.
	bad := DefaultConfig()
	if err := run(context.Background(), &bad, stdout); !errors.Is(err, cli.ErrUsage) {
		t.Fatalf("no url: %v", err)
	}
	bad.URL, bad.Model = srv.URL, "/nonexistent"
	if err := run(context.Background(), &bad, stdout); !errors.Is(err, cli.ErrUsage) {
		t.Fatalf("bad model: %v", err)
	}
}
