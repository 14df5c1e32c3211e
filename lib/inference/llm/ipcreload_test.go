package llm

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/protocol"
)

const trainerGPU = "GPU-11111111-2222-3333-4444-555555555555"

// exportOn is an IPCSource for a buffer on gpu (one bf16 tensor; the scripted server copies nothing).
func exportOn(gpu string) IPCSource {
	return func() (protocol.UpdateWeightsFromIPCRequest, error) {
		var h [protocol.IPCHandleBytes]byte
		h[0] = 1
		return protocol.NewUpdateWeightsFromIPC(h, gpu, []protocol.IPCTensor{{Name: "model.embed_tokens.weight", DType: "bfloat16", Shape: []int64{8, 4}}}, 64), nil
	}
}

// TestReloadModeChoice: which path a ModeReloader takes against scripted servers that do and do
// not take weights by CUDA IPC, and that the choice is logged once per endpoint.
func TestReloadModeChoice(t *testing.T) {
	failing := IPCSource(func() (protocol.UpdateWeightsFromIPCRequest, error) {
		return protocol.UpdateWeightsFromIPCRequest{}, errors.New("cpu backend")
	})
	for _, tc := range []struct {
		name      string
		mode      string
		serverGPU string // ServeIPC; "" = a plain SGLang-like server (404 on the IPC endpoint)
		src       IPCSource
		fail      int // FailNext(1, fail) before the first reload
		want      string
		wantErr   bool
		logged    string
	}{
		{name: "auto, SGLang server", mode: ReloadAuto, src: exportOn(trainerGPU), want: ReloadDisk, logged: "no gpu_uuid"},
		{name: "auto, sampler on the trainer's GPU", mode: ReloadAuto, serverGPU: trainerGPU, src: exportOn(trainerGPU), want: ReloadIPC, logged: "by CUDA IPC"},
		{name: "auto, sampler on another GPU", mode: ReloadAuto, serverGPU: "GPU-other", src: exportOn(trainerGPU), want: ReloadDisk, logged: "another GPU"},
		{name: "auto, backend without IPC", mode: ReloadAuto, serverGPU: trainerGPU, want: ReloadDisk, logged: "cannot export"},
		{name: "auto, export fails", mode: ReloadAuto, serverGPU: trainerGPU, src: failing, want: ReloadDisk, logged: "cpu backend"},
		{name: "auto, IPC endpoint answers 501", mode: ReloadAuto, serverGPU: trainerGPU, src: exportOn(trainerGPU), fail: 501, want: ReloadDisk, logged: "from disk from now on"},
		{name: "auto, IPC update refused (400)", mode: ReloadAuto, serverGPU: trainerGPU, src: exportOn(trainerGPU), fail: 400, want: ReloadDisk, logged: "update by CUDA IPC failed"},
		{name: "disk", mode: ReloadDisk, serverGPU: trainerGPU, src: exportOn(trainerGPU), want: ReloadDisk},
		{name: "ipc", mode: ReloadIPC, serverGPU: trainerGPU, src: exportOn(trainerGPU), want: ReloadIPC},
		{name: "ipc, SGLang server", mode: ReloadIPC, src: exportOn(trainerGPU), want: ReloadIPC, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := server(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
			if tc.serverGPU != "" {
				s.ServeIPC(tc.serverGPU)
			}
			ep := fastEndpoint(t, s.URL, nil)
			var logBuf bytes.Buffer
			r, err := NewModeReloader(ep, tc.mode, NewSGLangReloader(ep, SGLangReloadOptions{}), tc.src, slog.New(slog.NewTextHandler(&logBuf, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if tc.fail != 0 {
				s.FailNext(1, tc.fail)
			}
			ctx := context.Background()
			for v := int64(1); v <= 2; v++ {
				err := r.LoadWeights(ctx, "/ckpt/v"+VersionString(v), v)
				if tc.wantErr {
					if !errors.Is(err, ErrRejected) {
						t.Fatalf("reload %d: err %v, want ErrRejected", v, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("reload %d: %v", v, err)
				}
				if s.WeightVersion() != VersionString(v) {
					t.Fatalf("server version %q after reload %d", s.WeightVersion(), v)
				}
			}
			if r.Chosen() != tc.want {
				t.Fatalf("chose %q, want %q", r.Chosen(), tc.want)
			}
			disk, ipc := s.Requests("/update_weights_from_disk"), s.Requests("/update_weights_from_ipc")
			switch {
			case tc.wantErr:
				if disk != 0 {
					t.Fatalf("reload.mode=ipc fell back to disk (%d reloads)", disk)
				}
			case tc.want == ReloadIPC && (ipc != 2 || disk != 0):
				t.Fatalf("IPC path: %d ipc and %d disk requests, want 2 and 0", ipc, disk)
			case tc.want == ReloadDisk && disk != 2:
				t.Fatalf("disk path: %d disk requests, want 2", disk)
			case tc.want == ReloadDisk && tc.fail == 0 && ipc != 0:
				t.Fatalf("disk path tried the IPC endpoint %d times", ipc)
			}
			if tc.logged != "" {
				if !strings.Contains(logBuf.String(), tc.logged) {
					t.Fatalf("log %q does not say %q", logBuf.String(), tc.logged)
				}
				want := 1
				if tc.fail != 0 {
					want = 2 // the choice, then the fallback
				}
				if n := strings.Count(logBuf.String(), "weight reload:"); n != want {
					t.Fatalf("the choice was logged %d times, want %d:\n%s", n, want, logBuf.String())
				}
			}
		})
	}
}

func TestReloadModeRefusals(t *testing.T) {
	s := server(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	ep := fastEndpoint(t, s.URL, nil)
	if _, err := NewModeReloader(ep, ReloadIPC, NewSGLangReloader(ep, SGLangReloadOptions{}), nil, nil); err == nil || !strings.Contains(err.Error(), "reload.mode=disk") {
		t.Errorf("ipc without an export: %v", err)
	}
	if err := ValidateReloadMode("shm"); err == nil {
		t.Error("reload.mode=shm accepted")
	}
	if _, err := WithReloadMode(MultiReloader{NewVLLMReloader(ep)}, ReloadIPC, exportOn(trainerGPU), nil); err == nil {
		t.Error("reload.mode=ipc accepted for vLLM")
	}
	r, err := WithReloadMode(MultiReloader{NewSGLangReloader(ep, SGLangReloadOptions{}), NewVLLMReloader(ep)}, ReloadAuto, exportOn(trainerGPU), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := r.(MultiReloader)
	if _, ok := m[0].(*ModeReloader); !ok {
		t.Errorf("SGLang reloader not wrapped: %T", m[0])
	}
	if _, ok := m[1].(*VLLMReloader); !ok {
		t.Errorf("vLLM reloader changed: %T", m[1])
	}
}
