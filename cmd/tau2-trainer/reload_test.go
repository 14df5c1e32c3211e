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

// TestWeightSyncWiring: the cpu backend broadcasts by the host hub (sync.backend auto → tcp), so
// reload.mode=distributed and auto put an SGLang-protocol server behind the weight-sync
// reloader; nccl is refused for a backend without a device weight buffer, and distributed with
// sync.backend off is a usage error; disk leaves the reloader as it is.
func TestWeightSyncWiring(t *testing.T) {
	be, err := cpu.NewRandom(gpu.TinyConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	ecfg := llm.DefaultEndpointConfig()
	ecfg.BaseURL = "http://127.0.0.1:1"
	ep, err := llm.NewEndpoint(ecfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	sync := DefaultConfig().Reload.Sync
	for _, tc := range []struct {
		mode, backend string
		want          string // "" = a SyncReloader, "same" = unchanged, else a usage error containing it
	}{
		{llm.ReloadDistributed, "auto", ""},
		{llm.ReloadAuto, "auto", ""},
		{llm.ReloadDistributed, "tcp", ""},
		{llm.ReloadDisk, "auto", "same"},
		{llm.ReloadAuto, "off", "same"},
		{llm.ReloadDistributed, "nccl", "nccl"},
		{llm.ReloadDistributed, "off", "cannot broadcast"},
	} {
		c := ReloadConfig{Mode: tc.mode, Sync: sync}
		c.Sync.Backend = tc.backend
		r, err := withReloadMode(llm.NewSGLangReloader(ep, llm.SGLangReloadOptions{}), tc.mode, be, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := withWeightSync(r, c, be, true, 0, nil)
		_, isSync := out.(*llm.SyncReloader)
		switch tc.want {
		case "":
			if err != nil || !isSync {
				t.Errorf("%s/%s: %T, %v; want the weight-sync reloader", tc.mode, tc.backend, out, err)
			}
		case "same":
			if err != nil || out != r {
				t.Errorf("%s/%s: %T, %v; want the reloader unchanged", tc.mode, tc.backend, out, err)
			}
		default:
			if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s/%s: %v, want a usage error containing %q", tc.mode, tc.backend, err, tc.want)
			}
		}
	}
}

// TestWeightSyncAutoSkipsTheHubOnGPUs: sync.backend auto does not put a non-pure-Go backend's
// weights through the host hub (a data-parallel cuda group at GPU sizes reloads from disk), unless
// tcp is asked for.
func TestWeightSyncAutoSkipsTheHubOnGPUs(t *testing.T) {
	be, err := cpu.NewRandom(gpu.TinyConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	c := DefaultConfig().Reload.Sync
	if src, err := weightSyncSource(c, be, false, 0, false); src != nil || err != nil {
		t.Fatalf("auto, not pure Go: %v, %v; want no group", src, err)
	}
	c.Backend = "tcp"
	if src, err := weightSyncSource(c, be, false, 0, false); src == nil || err != nil {
		t.Fatalf("tcp asked for: %v, %v", src, err)
	}
}
