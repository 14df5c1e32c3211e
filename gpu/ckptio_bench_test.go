//go:build unix

package gpu_test

import (
	"os"
	"path/filepath"
	"testing"

	"tau2rl/gpu"
	"tau2rl/lib/cputime"
)

// The checkpoint I/O benchmarks (docs/PERFORMANCE.md, "Checkpoint I/O"): a bf16 save, the load
// a trainer or sampler starts with, and the finiteness check both run, through the code paths
// the backends use (gpu.SaveCheckpoint, gpu.LoadWeights, Weights.Check). The default shape is
// Qwen3-1.7B's matrices with one layer and an 8192-token vocabulary (67 M parameters, 134 MB of
// bf16), small enough for `make bench`; TAU2RL_CKPT_BENCH_MODEL=path/to/config.json runs a real
// shape (deploy/models/qwen3-1.7b/config.json: 3.4 GB of bf16, 10 GB of memory).

func ckptBenchConfig(b *testing.B) gpu.Config {
	b.Helper()
	if p := os.Getenv("TAU2RL_CKPT_BENCH_MODEL"); p != "" {
		c, err := gpu.LoadConfig(p)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	c := gpu.Qwen3_1_7B()
	c.NumHiddenLayers, c.VocabSize = 1, 8192
	return c
}

func ckptBenchWeights(b *testing.B) *gpu.Weights {
	b.Helper()
	w, err := gpu.NewPoolWeights(ckptBenchConfig(b), 1)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkCheckpointSaveBF16 is Weights.Save in bfloat16: conversion, write, fsync, rename.
// Bytes are the bf16 bytes written.
func BenchmarkCheckpointSaveBF16(b *testing.B) {
	w := ckptBenchWeights(b)
	dir := b.TempDir()
	b.SetBytes(2 * w.Config.NumParams())
	b.ResetTimer()
	c0 := cputime.Now()
	for range b.N {
		if err := w.Save(dir, gpu.BF16); err != nil {
			b.Fatal(err)
		}
	}
	cputime.Report(b, c0, cputime.Milliseconds)
}

// BenchmarkCheckpointLoadBF16 is gpu.LoadWeights of a bf16 checkpoint (page cache warm): read,
// widen to fp32, check. Bytes are the bf16 bytes read.
func BenchmarkCheckpointLoadBF16(b *testing.B) {
	w := ckptBenchWeights(b)
	dir := b.TempDir()
	if err := w.Save(dir, gpu.BF16); err != nil {
		b.Fatal(err)
	}
	w = nil
	b.SetBytes(2 * ckptBenchConfig(b).NumParams())
	b.ResetTimer()
	c0 := cputime.Now()
	for range b.N {
		if _, err := gpu.LoadWeights(filepath.Clean(dir)); err != nil {
			b.Fatal(err)
		}
	}
	cputime.Report(b, c0, cputime.Milliseconds)
}

// BenchmarkWeightsCheck is the finiteness check every load and every backend constructor runs.
// Bytes are the fp32 bytes scanned.
func BenchmarkWeightsCheck(b *testing.B) {
	w := ckptBenchWeights(b)
	b.SetBytes(4 * w.Config.NumParams())
	b.ResetTimer()
	c0 := cputime.Now()
	for range b.N {
		if err := w.Check(); err != nil {
			b.Fatal(err)
		}
	}
	cputime.Report(b, c0, cputime.Milliseconds)
}
