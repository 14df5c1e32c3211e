package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
)

// TestTrainerBinaryReloadsFromModelPathFirst: started fresh from model.path (given relative)
// with a server that serves "version 557" (tau2-sampler started from an SFT checkpoint at step
// 557), the trainer reloads it from model.path's absolute path under version 0 before anything
// else, then from checkpoint v1 after its step. Before, the first reload was v1's: every token
// sampled until then carried 557.
func TestTrainerBinaryReloadsFromModelPathFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded broker round trip")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := brokerWithTwoGroups(t, ctx, 1)

	be, err := cpu.NewRandom(gpu.TinyConfig(), 5)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "sft", "v557")
	if err := be.Save(model, gpu.F32); err != nil {
		t.Fatal(err)
	}
	be.Close()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, model)
	if err != nil {
		t.Fatal(err)
	}

	s, err := llmtest.NewServer(tokenizertest.Qwen3(t), llmtest.Constant(llmtest.Reply{Content: "ok"}), llmtest.WithWeightVersion("557"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mu sync.Mutex
	var reloads []string // "path@version" of each /update_weights_from_disk, in order
	h := s.Handler()
	rs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/update_weights_from_disk" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req protocol.UpdateWeightsFromDiskRequest
			if err := json.Unmarshal(body, &req); err == nil && req.WeightVersion != nil {
				mu.Lock()
				reloads = append(reloads, req.ModelPath+"@"+*req.WeightVersion)
				mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	}))
	defer rs.Close()

	dir := t.TempDir()
	args := []string{"kafka.brokers=[" + b.Addr() + "]", "kafka.reader.max_wait=50ms", "kafka.reader.heartbeat_interval=500ms",
		"kafka.reader.session_timeout=6s", "admission.enabled=false", "batch_size=2", "group.group_size=4", "max_steps=1",
		"checkpoint.dtype=float32", "checkpoint.dir=" + dir, "actor.mb_spec.max_tokens_per_mb=512", "tick=20ms",
		"model.config=", "model.path=" + rel, "reload.backend=sglang", "reload.endpoints=[{base_url: " + rs.URL + "}]"}
	if err := execute(t, ctx, args...); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{model + "@0", filepath.Join(dir, "v1") + "@1"}
	if !slices.Equal(reloads, want) {
		t.Fatalf("reloads %q, want %q", reloads, want)
	}
	if s.WeightVersion() != "1" {
		t.Fatalf("server at version %q, want 1", s.WeightVersion())
	}
}
