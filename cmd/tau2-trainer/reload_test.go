package main

import (
	"errors"
	"strings"
	"testing"

	"tau2rl/cmd/internal/cli"
	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/lib/inference/llm"
)

// TestReloadModeIPCNeedsAnExportingBackend: reload.mode=ipc with the cpu backend is refused
// before training (a usage error naming the disk mode); auto and disk accept it (auto reloads
// from disk).
func TestReloadModeIPCNeedsAnExportingBackend(t *testing.T) {
	be, err := cpu.NewRandom(gpu.TinyConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	var nop llm.NopReloader
	_, err = withReloadMode(&nop, llm.ReloadIPC, be, nil)
	if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "reload.mode=disk") {
		t.Fatalf("ipc on cpu: %v, want a usage error naming reload.mode=disk", err)
	}
	for _, mode := range []string{llm.ReloadAuto, llm.ReloadDisk} {
		if _, err := withReloadMode(&nop, mode, be, nil); err != nil {
			t.Errorf("%s on cpu: %v", mode, err)
		}
	}
}
