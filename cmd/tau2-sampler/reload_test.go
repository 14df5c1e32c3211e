package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/lib/inference/protocol"
	trainckpt "tau2rl/trainer/checkpoint"
)

// saveVersion publishes a checkpoint of version v into dir the way the trainer does (temporary
// directory, state file, rename), with random weights of the tiny model.
func saveVersion(t *testing.T, dir string, v int64, seed uint64) string {
	t.Helper()
	m := &trainckpt.Manager{Dir: dir, Keep: 10}
	p, err := m.Save(trainckpt.State{Version: v, Step: v}, func(d string) error {
		_, err := gpu.WriteRandomCheckpoint(d, gpu.TinyConfig(), seed, initOpts, gpu.BF16)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// modelInfo returns /get_model_info's model_path and weight_version.
func modelInfo(t *testing.T, url string) (path, version string) {
	t.Helper()
	resp, err := http.Get(url + "/get_model_info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info protocol.ModelInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	return info.ModelPath, info.WeightVersion
}

// TestStartsOnNewestCheckpoint: with checkpoint_dir the sampler serves the newest complete
// checkpoint at start, reports its version, and ignores a half-written one; a directory without
// any (or not created yet) falls back to model.
func TestStartsOnNewestCheckpoint(t *testing.T) {
	model := checkpoint(t, gpu.TinyConfig(), 1)
	tests := []struct {
		name        string
		setup       func(dir string) string // returns the expected model_path ("" = model)
		wantVersion string
	}{
		{"newest of two", func(dir string) string {
			saveVersion(t, dir, 1, 2)
			p := saveVersion(t, dir, 2, 3)
			// A checkpoint being written (the trainer's temporary name) is never a candidate.
			if _, err := gpu.WriteRandomCheckpoint(filepath.Join(dir, ".tmp-v3-999"), gpu.TinyConfig(), 4, initOpts, gpu.BF16); err != nil {
				t.Fatal(err)
			}
			return p
		}, "2"},
		{"empty directory", func(dir string) string { os.MkdirAll(dir, 0o755); return "" }, "0"},
		{"missing directory", func(string) string { return "" }, "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "checkpoints")
			want := tc.setup(dir)
			if want == "" {
				want = model
			}
			url, _ := start(t, "model="+model, "checkpoint_dir="+dir, "tokenizer=none")
			path, version := modelInfo(t, url)
			if path != want || version != tc.wantVersion {
				t.Errorf("serving %s version %q, want %s version %q", path, version, want, tc.wantVersion)
			}
		})
	}
}

// TestSIGHUPReloadsNewest: SIGHUP (the unit's ExecReload) swaps in the newest checkpoint and
// its version; a second SIGHUP with nothing newer changes nothing; the process survives both.
func TestSIGHUPReloadsNewest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoints")
	saveVersion(t, dir, 1, 2)
	url, stop := start(t, "model="+checkpoint(t, gpu.TinyConfig(), 1), "checkpoint_dir="+dir, "tokenizer=none")
	if _, v := modelInfo(t, url); v != "1" {
		t.Fatalf("started on version %q, want 1", v)
	}
	p2 := saveVersion(t, dir, 2, 3)
	// The test process keeps SIGHUP caught until it ends: a signal still in flight when the
	// server stops (and stops catching it) would otherwise end the whole test binary.
	delivered := make(chan os.Signal, 4)
	signal.Notify(delivered, syscall.SIGHUP)
	defer signal.Stop(delivered)
	for range 2 {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		<-delivered
		deadline := time.Now().Add(30 * time.Second)
		for {
			path, v := modelInfo(t, url)
			if path == p2 && v == "2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after SIGHUP: serving %s version %q, want %s version 2", path, v, p2)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("stop after reloads: %v", err)
	}
}
