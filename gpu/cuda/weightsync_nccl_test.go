//go:build cuda && nccltest

package cuda

// The weight-sync group on two GPUs (issue 29), built only with -tags 'cuda nccltest' so that the
// package's usual test binary does not need the NCCL shim (gpu/cuda/NOTES.md has the command):
// this process trains on GPU 0 and broadcasts by NCCL; a child process on GPU 1
// (CUDA_VISIBLE_DEVICES=1) joins the group as a tau2-sampler does, receives into its decoder's
// device staging buffer and swaps the weights in through the sampler engine.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/sampler"
	"tau2rl/gpu/weightsync"
	"tau2rl/lib/inference/protocol"
)

const (
	envSyncReq  = "T2_SYNC_REQUEST" // the child's /init_weights_update_group body
	envSyncBody = "T2_SYNC_UPDATE"  // the child's /update_weights_from_distributed body
	envSyncCkpt = "T2_SYNC_CKPT"    // the bf16 checkpoint of the broadcast weights
)

// TestNCCLWeightsToDecoderOnAnotherGPU: after one optimizer step on GPU 0, the trainer's bf16
// weights reach a decoder on GPU 1 by the NCCL weight-sync group bit for bit equal to the bf16
// checkpoint of the same step, and the decoder's greedy tokens equal a decoder loaded from it.
func TestNCCLWeightsToDecoderOnAnotherGPU(t *testing.T) {
	if os.Getenv(envSyncReq) != "" {
		t.Skip("the child runs TestNCCLChild only")
	}
	if n, err := DeviceCount(); err != nil || n < 2 {
		t.Skipf("needs two CUDA devices (%d, %v)", n, err)
	}
	cfg := ipcConfig(t)
	w, err := gpu.NewRandomWeightsWith(cfg, 11, gpu.InitOptions{Std: 0.02, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	be, err := New(w, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	toks := make([]int32, 64)
	dl := make([]float32, len(toks))
	for i := range toks {
		toks[i], dl[i] = int32((i*7919+13)%cfg.VocabSize), 1
	}
	if _, _, err := be.Forward(gpu.Chain(toks)); err != nil {
		t.Fatal(err)
	}
	if err := be.Backward(dl); err != nil {
		t.Fatal(err)
	}
	opt := gpu.DefaultOptimizer()
	opt.LR = 1e-3
	if _, err := be.Step(opt); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "v1")
	if err := be.Save(dir, gpu.BF16); err != nil {
		t.Fatal(err)
	}
	tr, err := weightsync.NewTrainer(protocol.WeightSyncNCCL, "127.0.0.1:0", "", "nccl-test", 0, weightsync.DeviceSource(be))
	if err != nil {
		t.Fatal(err)
	}
	h, err := tr.Listen(2)
	if err != nil {
		t.Fatal(err)
	}
	req := h.Request()
	req.RankOffset = 1
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The tensors as the update's body carries them (the group's Prepare gives the same).
	_, ts, err := weightsync.DeviceSource(be)()
	if err != nil {
		t.Fatal(err)
	}
	pts := weightsync.ProtocolTensors(ts)
	for i := range pts {
		pts[i].OffsetBytes = 0
	}
	body := protocol.DistributedTensors(req.GroupName, pts)
	rj, _ := json.Marshal(req)
	bj, _ := json.Marshal(body)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNCCLChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envSyncReq+"="+string(rj), envSyncBody+"="+string(bj), envSyncCkpt+"="+dir,
		"CUDA_VISIBLE_DEVICES=1", "NCCL_NVLS_ENABLE=0")
	out := make(chan []byte, 1)
	go func() { b, _ := cmd.CombinedOutput(); out <- b }()
	g, err := h.Join(ctx)
	if err != nil {
		t.Fatalf("rank 0 join: %v\nchild:\n%s", err, <-out)
	}
	defer g.Close()
	if _, err := g.Prepare(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := g.Broadcast(ctx); err != nil {
		t.Fatalf("broadcast: %v\nchild:\n%s", err, <-out)
	}
	t.Logf("rank 0 broadcast %d tensors in %.1f ms", len(ts), float64(time.Since(t0).Microseconds())/1000)
	child := <-out
	t.Logf("child:\n%s", child)
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Fatal("the child failed")
	}
}

// TestNCCLChild is the sampler's side: join, receive into the decoder's staging buffer, swap
// through the engine, compare with the checkpoint.
func TestNCCLChild(t *testing.T) {
	rj, bj, dir := os.Getenv(envSyncReq), os.Getenv(envSyncBody), os.Getenv(envSyncCkpt)
	if rj == "" {
		t.Skip("runs as TestNCCLWeightsToDecoderOnAnotherGPU's child")
	}
	req, err := protocol.DecodeInitWeightsUpdateGroupRequest([]byte(rj))
	if err != nil {
		t.Fatal(err)
	}
	body, err := protocol.DecodeUpdateWeightsFromDistributedRequest([]byte(bj))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gpu.LoadConfig(dir)
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	c, err := weightsync.Join(ctx, req, dec.DeviceOrdinal())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("joined in %.1f ms", float64(time.Since(t0).Microseconds())/1000)
	pts, _ := body.Tensors()
	ts, total := weightsync.Packed(weightsync.Tensors(pts))
	if err := weightsync.Check(cfg, ts, total); err != nil {
		t.Fatal(err)
	}
	p, err := dec.StagingBuffer(total)
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if err := weightsync.Receive(c, collective.DeviceBuffer(p, int(total/2), collective.BF16), ts); err != nil {
		t.Fatal(err)
	}
	recv := time.Since(t0)
	eng, err := sampler.New(dec, sampler.Config{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = eng.Run(context.Background()) }()
	took, err := eng.SwapWeightsWith(ctx, "distributed", func(gpu.Decoder) error { return dec.LoadWeightsStaged(ts, total) }, "1", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("received %.1f MB in %.1f ms, swapped in %.2f ms", float64(total)/1e6, float64(recv.Microseconds())/1000, float64(took.Microseconds())/1000)
	prompt := make([]int32, 16)
	for i := range prompt {
		prompt[i] = int32((i*104729 + 7) % cfg.VocabSize)
	}
	greedy := sampler.Request{ID: "g", Prompt: prompt, MaxNewTokens: 32, IgnoreEOS: true, Params: gpu.SampleParams{TopP: 1}}
	got, err := eng.Submit(ctx, greedy)
	if err != nil || got.Version != "1" {
		t.Fatalf("after the update: version %q, %v", got.Version, err)
	}
	eng.Close()
	<-eng.Done()
	w, err := gpu.LoadWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkAgainstCheckpoint(ctx, t, "nccl", dec, w, greedy, got.OutputIDs)
}
