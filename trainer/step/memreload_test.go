package step

import (
	"slices"
	"testing"

	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
)

// TestReloadBetweenCheckpoints: with checkpoint.every=2, a server that takes the weights by CUDA
// IPC (the scripted server after ServeIPC, reload.mode=ipc) is reloaded after every step, the
// versions without a checkpoint published as in_memory; a plain SGLang server (reload.mode=auto
// falls back to disk) is reloaded only at the checkpoints, as before.
func TestReloadBetweenCheckpoints(t *testing.T) {
	const gpuID = "GPU-11111111-2222-3333-4444-555555555555"
	src := llm.IPCSource(func() (protocol.UpdateWeightsFromIPCRequest, error) {
		var h [protocol.IPCHandleBytes]byte
		return protocol.NewUpdateWeightsFromIPC(h, gpuID, []protocol.IPCTensor{{Name: "model.norm.weight", DType: "bfloat16", Shape: []int64{4}}}, 8), nil
	})
	for _, tc := range []struct {
		name       string
		mode       string
		ipc        bool
		inMemory   []int64 // versions published without a checkpoint
		checkpoint []int64 // versions published with one
		ipcReloads int
	}{
		// Version 0: the fresh trainer's initial weights, from memory when the server takes them
		// so, else from checkpoint.dir/initial (the random initialisation has no model.path).
		{name: "ipc", mode: llm.ReloadIPC, ipc: true, inMemory: []int64{0, 1, 3}, checkpoint: []int64{2, 3}, ipcReloads: 5},
		{name: "auto, SGLang server", mode: llm.ReloadAuto, inMemory: nil, checkpoint: []int64{0, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := llmtest.NewServer(tokenizertest.Qwen3(t), llmtest.Constant(llmtest.Reply{Content: "ok"}))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if tc.ipc {
				s.ServeIPC(gpuID)
			}
			ecfg := llm.DefaultEndpointConfig()
			ecfg.BaseURL = s.URL
			ep, err := llm.NewEndpoint(ecfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := llm.NewModeReloader(ep, tc.mode, llm.NewSGLangReloader(ep, llm.SGLangReloadOptions{}), src, nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(t)
			cfg.MaxSteps = 3
			cfg.Checkpoint.Every = 2
			rec := &recorder{}
			tr, err := New(cfg, Deps{Backend: newBackend(t), Source: newMemSource(groupMessages(t, []string{"0", "1", "2", "3", "4", "5"}, 0, 0)),
				Reloader: r, Versions: rec})
			if err != nil {
				t.Fatal(err)
			}
			runTrainer(t, tr)
			var mem, ckpt []int64
			for _, v := range rec.versions {
				if err := v.Validate(); err != nil {
					t.Fatal(err)
				}
				if v.InMemory {
					mem = append(mem, v.Version)
				} else {
					ckpt = append(ckpt, v.Version)
				}
			}
			if !slices.Equal(mem, tc.inMemory) || !slices.Equal(ckpt, tc.checkpoint) {
				t.Fatalf("published in memory %v and with a checkpoint %v, want %v and %v", mem, ckpt, tc.inMemory, tc.checkpoint)
			}
			if got := s.Requests("/update_weights_from_ipc"); got != tc.ipcReloads {
				t.Fatalf("%d IPC reloads, want %d", got, tc.ipcReloads)
			}
			if s.WeightVersion() != "3" {
				t.Fatalf("server serves version %q, want 3", s.WeightVersion())
			}
		})
	}
}
