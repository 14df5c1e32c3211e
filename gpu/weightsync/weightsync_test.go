package weightsync

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/lib/inference/protocol"
)

type weightsOf struct{ w *gpu.Weights }

func (x weightsOf) Weights() (*gpu.Weights, error) { return x.w, nil }

// TestHostSourceIsTheBF16Checkpoint: the host source's bytes, received by every rank of an
// in-process world and converted back (HostStaging.Weights), are bit for bit the bf16 checkpoint
// of the same weights as gpu.LoadWeights reads it; the tensors go in gpu.ParamSpecs order,
// packed.
func TestHostSourceIsTheBF16Checkpoint(t *testing.T) {
	cfg := gpu.TinyConfig()
	w, err := gpu.NewRandomWeightsWith(cfg, 4, gpu.InitOptions{Std: 0.5, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ck")
	if err := w.Save(dir, gpu.BF16); err != nil {
		t.Fatal(err)
	}
	ck, err := gpu.LoadWeights(dir)
	if err != nil {
		t.Fatal(err)
	}
	buf, ts, err := HostSource(weightsOf{w})()
	if err != nil {
		t.Fatal(err)
	}
	specs := gpu.ParamSpecs(cfg)
	var off int64
	for i, s := range specs {
		if ts[i].Name != s.Name || ts[i].Offset != off || ts[i].DType != gpu.BF16 {
			t.Fatalf("tensor %d: %+v, want %s at %d", i, ts[i], s.Name, off)
		}
		off += ts[i].Bytes()
	}
	if err := Check(cfg, ts, off); err != nil {
		t.Fatal(err)
	}
	const world = 3
	comms, err := collective.NewLocal(world)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]*gpu.Weights, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			if r == 0 {
				errs[r] = Broadcast(c, buf, ts)
				return
			}
			var st HostStaging
			pts, total := Packed(ts)
			if errs[r] = Receive(c, st.Buffer(total), pts); errs[r] == nil {
				got[r], errs[r] = st.Weights(cfg, pts)
			}
		})
	}
	wg.Wait()
	for r := 1; r < world; r++ {
		if errs[r] != nil || errs[0] != nil {
			t.Fatalf("rank %d: %v (rank 0: %v)", r, errs[r], errs[0])
		}
		for _, s := range specs {
			a, b := got[r].Tensors[s.Name], ck.Tensors[s.Name]
			for i := range b {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("rank %d %s[%d] = %v, checkpoint %v", r, s.Name, i, a[i], b[i])
				}
			}
		}
	}
}

// TestCheckRefusesOtherTensors: a receiver refuses tensors that are not exactly the model's in
// bf16 before it receives anything.
func TestCheckRefusesOtherTensors(t *testing.T) {
	cfg := gpu.TinyConfig()
	var ts []gpu.IPCTensor
	for _, s := range gpu.ParamSpecs(cfg) {
		ts = append(ts, gpu.IPCTensor{Name: s.Name, DType: gpu.BF16, Shape: s.Shape})
	}
	for _, tc := range []struct {
		name string
		edit func([]gpu.IPCTensor) []gpu.IPCTensor
		want string
	}{
		{"missing", func(x []gpu.IPCTensor) []gpu.IPCTensor { return x[1:] }, "missing"},
		{"extra", func(x []gpu.IPCTensor) []gpu.IPCTensor {
			return append(x, gpu.IPCTensor{Name: "extra", DType: gpu.BF16, Shape: []int{1}})
		}, "not a parameter"},
		{"f32", func(x []gpu.IPCTensor) []gpu.IPCTensor { x[0].DType = gpu.F32; return x }, "decoder takes bfloat16"},
		{"shape", func(x []gpu.IPCTensor) []gpu.IPCTensor { x[0].Shape = []int{1, 2}; return x }, "shape"},
	} {
		x, total := Packed(tc.edit(append([]gpu.IPCTensor(nil), ts...)))
		if err := Check(cfg, x, total); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	x, total := Packed(ts)
	if err := Check(cfg, x, total); err != nil {
		t.Fatal(err)
	}
}

// TestListenAndJoinOverTheHub: a rendezvous on a free port forms a world of rank 0 and two
// joining ranks by the request Listen makes; an unspecified listen host without an advertised
// one is refused (the servers would have nothing to dial); nccl without the cuda build says so.
func TestListenAndJoinOverTheHub(t *testing.T) {
	if _, err := Listen(protocol.WeightSyncTCP, "0.0.0.0:0", "", "g", 2, 0); err == nil || !strings.Contains(err.Error(), "advertised") {
		t.Fatalf("unspecified host: %v", err)
	}
	if !HaveNCCL() {
		if _, err := NewTrainer(protocol.WeightSyncNCCL, "127.0.0.1:0", "", "g", 0, nil); !errors.Is(err, ErrNoNCCL) {
			t.Fatalf("nccl without cuda: %v", err)
		}
	}
	h, err := Listen(protocol.WeightSyncTCP, "127.0.0.1:0", "", "g", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.Request.MasterAddress != "127.0.0.1" || h.Request.MasterPort == 0 || h.Request.WorldSize != 3 {
		t.Fatalf("request %+v", h.Request)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	comms := make([]collective.Comm, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := 1; r < 3; r++ {
		wg.Go(func() {
			req := h.Request
			req.RankOffset = r
			comms[r], errs[r] = Join(ctx, req, 0)
		})
	}
	comms[0], errs[0] = h.Join(ctx)
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	data := []byte{1, 2, 3, 4, 5, 6}
	wg = sync.WaitGroup{}
	for r, c := range comms {
		wg.Go(func() {
			b := make([]byte, len(data))
			if r == 0 {
				copy(b, data)
			}
			errs[r] = c.Broadcast(collective.HostBytes(b, collective.BF16), 0)
			if errs[r] == nil && string(b) != string(data) {
				errs[r] = errors.New("other bytes")
			}
			c.Close()
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}
