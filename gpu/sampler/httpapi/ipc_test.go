package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/sampler"
	"tau2rl/lib/inference/protocol"
)

// TestIPCUpdateRefusedOnCPU: a sampler whose decoder cannot map CUDA memory (the cpu backend)
// answers /update_weights_from_ipc with 501, success=false and a message naming the disk path,
// keeps its weight version, and reports no gpu_uuid in /get_model_info (so a trainer's
// reload.mode=auto picks disk without trying).
func TestIPCUpdateRefusedOnCPU(t *testing.T) {
	f := newFixture(t, gpu.TinyConfig(), nil, sampler.Config{})
	var h [protocol.IPCHandleBytes]byte
	req := protocol.NewUpdateWeightsFromIPC(h, "GPU-00000000-0000-0000-0000-000000000000",
		[]protocol.IPCTensor{{Name: gpu.NameEmbed, DType: "bfloat16", Shape: []int64{4}, OffsetBytes: 0}}, 8)
	v := "1"
	req.WeightVersion = &v
	body, _ := json.Marshal(req)
	for _, b := range []string{string(body), `{}`} {
		status, out := f.post(t, "/update_weights_from_ipc", b)
		if status != http.StatusNotImplemented || out["success"] != false || !strings.Contains(out["message"].(string), "reload.mode=disk") {
			t.Fatalf("body %s: %d %v, want 501 naming reload.mode=disk", b, status, out)
		}
	}
	if got := f.eng.Stats().Version; got != "0" {
		t.Fatalf("version after a refused update: %q, want 0", got)
	}
	resp, err := http.Get(f.srv.URL + "/get_model_info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info protocol.ModelInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.GPUUUID != "" {
		t.Fatalf("cpu sampler reports gpu_uuid %q", info.GPUUUID)
	}
}
