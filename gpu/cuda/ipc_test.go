//go:build cuda

package cuda

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"tau2rl/gpu"
	"tau2rl/gpu/sampler"
)

// The CUDA IPC weight path (ipc.go) end to end. A handle cannot be opened in the process that
// made it, so TestIPCWeightsToDecoder (the trainer: a backend after one optimizer step, which
// saves a bf16 checkpoint and exports its weights) re-runs this test binary as a child running
// TestIPCChild (the sampler: a decoder on other weights, updated from the export), passing the
// export and the checkpoint through the environment. The child checks that after the update its
// weights are byte-identical to the checkpoint's, that a mismatched export is refused without a
// change, and prints the update time. T2_IPC_SHAPE=1.7b runs the same at Qwen3-1.7B's shape
// (random weights, no step) and prints the disk path's times beside it.

const (
	envIPCExport = "T2_IPC_EXPORT" // the parent's gpu.IPCExport as JSON
	envIPCCkpt   = "T2_IPC_CKPT"   // the parent's checkpoint directory
)

// ipcConfig is the shape under test: deploy/models/qwen3-learn (head_dim 64; the tiny model's 16
// is refused by the kernels), or Qwen3-1.7B's with T2_IPC_SHAPE=1.7b.
func ipcConfig(t *testing.T) gpu.Config {
	name := "qwen3-learn"
	if os.Getenv("T2_IPC_SHAPE") == "1.7b" {
		name = "qwen3-1.7b"
	}
	cfg, err := gpu.LoadConfig(filepath.Join("..", "..", "deploy", "models", name, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func skipWithoutGPU(t *testing.T) {
	if n, err := DeviceCount(); err != nil || n == 0 {
		t.Skipf("no CUDA device (%d, %v)", n, err)
	}
}

func TestIPCWeightsToDecoder(t *testing.T) {
	skipWithoutGPU(t)
	if os.Getenv(envIPCExport) != "" {
		t.Skip("the child runs TestIPCChild only")
	}
	cfg := ipcConfig(t)
	big := os.Getenv("T2_IPC_SHAPE") == "1.7b"
	w, err := gpu.NewRandomWeightsWith(cfg, 11, gpu.InitOptions{Std: 0.02, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	be, err := New(w, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if !big { // one optimizer step: the export must be the stepped weights, not the initial ones
		toks := make([]int32, 64)
		for i := range toks {
			toks[i] = int32((i*7919 + 13) % cfg.VocabSize)
		}
		if _, _, err := be.Forward(gpu.Chain(toks)); err != nil {
			t.Fatal(err)
		}
		dl := make([]float32, len(toks))
		for i := range dl {
			dl[i] = 1
		}
		if err := be.Backward(dl); err != nil {
			t.Fatal(err)
		}
		opt := gpu.DefaultOptimizer()
		opt.LR = 1e-3
		if _, err := be.Step(opt); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "v1")
	t0 := time.Now()
	if err := be.Save(dir, gpu.BF16); err != nil {
		t.Fatal(err)
	}
	saveMS := float64(time.Since(t0).Microseconds()) / 1000
	t0 = time.Now()
	x, err := be.ExportWeights()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("export: %d tensors, %.1f MB on %s, %.2f ms (first call: handle + sync)", len(x.Tensors), float64(x.TotalBytes)/1e6, x.Device,
		float64(time.Since(t0).Microseconds())/1000)
	t.Logf("disk path, trainer side: save bf16 checkpoint %.1f ms", saveMS)
	if err := x.CheckIPCTensors(cfg, gpu.BF16); err != nil {
		t.Fatalf("the export does not describe the model: %v", err)
	}
	js, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIPCChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envIPCExport+"="+string(js), envIPCCkpt+"="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestIPCChild") {
		t.Fatal("the child did not run TestIPCChild")
	}
}

// TestIPCChild is the sampler's side of TestIPCWeightsToDecoder; it only runs as its child.
func TestIPCChild(t *testing.T) {
	js, dir := os.Getenv(envIPCExport), os.Getenv(envIPCCkpt)
	if js == "" {
		t.Skip("runs as TestIPCWeightsToDecoder's child")
	}
	var x gpu.IPCExport
	if err := json.Unmarshal([]byte(js), &x); err != nil {
		t.Fatal(err)
	}
	cfg, err := gpu.LoadConfig(dir) // the checkpoint's config.json, as a sampler would serve it
	if err != nil {
		t.Fatal(err)
	}
	other, err := gpu.NewRandomWeightsWith(cfg, 99, gpu.InitOptions{Std: 0.02, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := NewDecoder(other, gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	before := decoderParams(t, dec)

	// Refusals first: nothing may change.
	bad := x
	bad.Tensors = append([]gpu.IPCTensor(nil), x.Tensors...)
	bad.Tensors[0].Shape = []int{bad.Tensors[0].Shape[0] - 1, bad.Tensors[0].Shape[1]}
	if err := dec.LoadWeightsIPC(bad); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("mis-shaped export: %v", err)
	}
	elsewhere := x
	elsewhere.Device = "GPU-00000000-0000-0000-0000-000000000000"
	if err := dec.LoadWeightsIPC(elsewhere); err == nil || !strings.Contains(err.Error(), "reload.mode=disk") {
		t.Fatalf("export from another GPU: %v", err)
	}
	if got := decoderParams(t, dec); string(u16bytes(got)) != string(u16bytes(before)) {
		t.Fatal("a refused update changed the weights")
	}

	// Through the sampler's engine, as tau2-sampler runs it: a request before the update is
	// version 0, one in flight across an update is split into exact version spans, one after is
	// the new version.
	prompt := make([]int32, 16)
	for i := range prompt {
		prompt[i] = int32((i*104729 + 7) % cfg.VocabSize)
	}
	greedy := func(id string, n int) sampler.Request {
		return sampler.Request{ID: id, Prompt: prompt, MaxNewTokens: n, IgnoreEOS: true, Params: gpu.SampleParams{TopP: 1}}
	}
	eng, err := sampler.New(dec, sampler.Config{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = eng.Run(context.Background()) }()
	ctx := context.Background()
	if r, err := eng.Submit(ctx, greedy("a", 8)); err != nil || r.Version != "0" {
		t.Fatalf("before the update: version %q, %v", r.Version, err)
	}
	first, err := eng.SwapWeightsIPC(ctx, x, "7", false)
	if err != nil {
		t.Fatal(err)
	}
	inflight := make(chan sampler.Result, 1)
	go func() {
		r, err := eng.Submit(ctx, greedy("c", 300))
		if err != nil {
			t.Error(err)
		}
		inflight <- r
	}()
	for g0, until := eng.Stats().Generated, time.Now().Add(time.Minute); eng.Stats().Generated < g0+20; {
		if time.Now().After(until) {
			t.Fatal("the in-flight request made no progress in a minute")
		}
		time.Sleep(time.Millisecond)
	}
	again, err := eng.SwapWeightsIPC(ctx, x, "8", false)
	if err != nil {
		t.Fatal(err)
	}
	c := <-inflight
	if len(c.Versions) != 2 || c.Versions[0].Version != "7" || c.Versions[1].Version != "8" || c.Versions[0].Start != 0 ||
		c.Versions[0].End != c.Versions[1].Start || c.Versions[1].End != len(c.OutputIDs) || c.Versions[0].End == 0 {
		t.Fatalf("request across the update: spans %+v over %d tokens, want 7 then 8", c.Versions, len(c.OutputIDs))
	}
	b, err := eng.Submit(ctx, greedy("b", 32))
	if err != nil || b.Version != "8" || len(b.Versions) != 1 {
		t.Fatalf("after the update: %+v, %v", b.Versions, err)
	}
	eng.Close()
	<-eng.Done()
	t.Logf("ipc update: %.2f ms first (open the handle + copy), %.2f ms again (copy only), %.1f MB; in-flight request split at token %d of %d",
		float64(first.Microseconds())/1000, float64(again.Microseconds())/1000, float64(x.TotalBytes)/1e6, c.Versions[0].End, len(c.OutputIDs))
	t0 := time.Now()
	w, err := gpu.LoadWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	read := time.Since(t0)
	checkAgainstCheckpoint(ctx, t, "ipc", dec, w, greedy("b", 32), b.OutputIDs)
	t0 = time.Now()
	if err := dec.LoadWeights(w); err != nil {
		t.Fatal(err)
	}
	t.Logf("disk path, sampler side: read checkpoint %.1f ms + convert and upload %.1f ms", float64(read.Microseconds())/1000,
		float64(time.Since(t0).Microseconds())/1000)
}

// checkAgainstCheckpoint is the check after a weight update that bypassed the disk (how, in
// messages: "ipc", "nccl"): dec's bf16 weights are bit for bit those of checkpoint w, and req
// (greedy) run on a decoder loaded from w gives the tokens dec gave after the update.
func checkAgainstCheckpoint(ctx context.Context, t *testing.T, how string, dec *Decoder, w *gpu.Weights, req sampler.Request, after []int32) {
	t.Helper()
	got := decoderParams(t, dec)
	want, err := dec.hostWeights(w)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range gpu.ParamSpecs(dec.cfg) {
		o, n := dec.pl.offs[s.Name], s.Size()
		for i := o; i < o+n; i++ {
			if got[i] != want[i] {
				t.Fatalf("%s[%d]: %s 0x%04x, checkpoint 0x%04x", s.Name, i-o, how, got[i], want[i])
			}
		}
	}
	ref, err := NewDecoder(w, gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	reng, err := sampler.New(ref, sampler.Config{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = reng.Run(context.Background()) }()
	rb, err := reng.Submit(ctx, req)
	reng.Close()
	<-reng.Done()
	if err != nil || !slices.Equal(rb.OutputIDs, after) {
		t.Fatalf("greedy tokens after the %s update %v, from the checkpoint %v (%v)", how, after, rb.OutputIDs, err)
	}
}

// decoderParams downloads the decoder's bf16 weight buffer.
func decoderParams(t *testing.T, d *Decoder) []uint16 {
	t.Helper()
	out, err := d.params()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func u16bytes(x []uint16) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 2*len(x)) }
