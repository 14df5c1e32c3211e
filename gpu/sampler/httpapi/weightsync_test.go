package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/safetensors"
	"tau2rl/gpu/sampler"
	"tau2rl/gpu/weightsync"
	"tau2rl/lib/inference/protocol"
)

// weightsOf is a set of weights as a trainer backend hands them out (gpu.WeightExporter).
type weightsOf struct{ w *gpu.Weights }

func (x weightsOf) Weights() (*gpu.Weights, error) { return x.w, nil }

// bf16Rounded is w as a bf16 checkpoint of it reads back.
func bf16Rounded(w *gpu.Weights) *gpu.Weights {
	out := &gpu.Weights{Config: w.Config, Tensors: map[string][]float32{}}
	for name, x := range w.Tensors {
		y := make([]float32, len(x))
		for i, v := range x {
			y[i] = safetensors.Float32FromBF16(safetensors.BF16FromFloat32(v))
		}
		out.Tensors[name] = y
	}
	return out
}

// postJSON posts body to url+path and decodes SGLang's {success, message}; safe in goroutines.
func postJSON(url, path string, body any) (int, protocol.UpdateWeightsResponse, error) {
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+path, "application/json", bytes.NewReader(b))
	var out protocol.UpdateWeightsResponse
	if err != nil {
		return 0, out, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil || out.Success == nil {
		return resp.StatusCode, out, fmt.Errorf("%s: status %d, body %q", path, resp.StatusCode, data)
	}
	return resp.StatusCode, out, nil
}

// greedy is the sampler's greedy continuation of a fixed prompt and the version it reports.
func greedy(t *testing.T, f *fixture) ([]int32, string) {
	t.Helper()
	status, out := f.post(t, "/generate", `{"input_ids":[3,1,4,1,5,9,2,6],"sampling_params":{"max_new_tokens":12,"temperature":0}}`)
	if status != http.StatusOK {
		t.Fatalf("/generate: %d %v", status, out)
	}
	return ints(out["output_ids"]), out["meta_info"].(map[string]any)["weight_version"].(string)
}

// cutProxy forwards TCP connections to target; once armed, it cuts the next one's traffic from
// the target (both sides closed) before forwarding its first byte: to the hub, the rank behind
// it died in the middle of a broadcast, as a killed sampler process does.
type cutProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	cut    chan struct{}
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, cut: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(up, c); up.Close() }()
			go func() {
				defer c.Close()
				defer up.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := up.Read(buf)
					if n > 0 && p.armed.Load() {
						close(p.cut)
						return
					}
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *cutProxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// syncTrainer is rank 0 of a group of the fixtures, driven by hand (lib/inference/llm's
// SyncReloader does the same for the trainer).
type syncTrainer struct {
	comm  collective.Comm
	group string
}

// update sends w as version to fs: every server's answer and the broadcast's error.
func (s *syncTrainer) update(w *gpu.Weights, version string, fs []*fixture) ([]error, error) {
	buf, ts, err := weightsync.HostSource(weightsOf{w})()
	if err != nil {
		return nil, err
	}
	req := protocol.DistributedTensors(s.group, weightsync.ProtocolTensors(ts))
	req.WeightVersion = &version
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Go(func() {
			status, out, err := postJSON(f.srv.URL, "/update_weights_from_distributed", req)
			if err == nil && (status != http.StatusOK || !*out.Success) {
				err = fmt.Errorf("update: %d %s", status, out.Message)
			}
			errs[i] = err
		})
	}
	berr := weightsync.Broadcast(s.comm, buf, ts)
	wg.Wait()
	return errs, berr
}

// TestDistributedUpdateSwapsAllOrNothing: two samplers join a trainer's group over the host hub;
// a version broadcast tensor by tensor leaves both generating exactly what a sampler loaded with
// the bf16 checkpoint of the same weights generates, under the new version. Then one sampler
// dies in the middle of the next broadcast: the update fails on every rank, and the survivor —
// which had already staged part of the new weights — still serves the previous version's
// weights whole (its greedy tokens unchanged) under the previous version, and has left the group.
func TestDistributedUpdateSwapsAllOrNothing(t *testing.T) {
	cfg := gpu.TinyConfig()
	f1, f2 := newFixture(t, cfg, nil, sampler.Config{}), newFixture(t, cfg, nil, sampler.Config{})
	ref := newFixture(t, cfg, nil, sampler.Config{})
	fs := []*fixture{f1, f2}

	before, _ := greedy(t, f1)
	w1, err := gpu.NewRandomWeightsWith(cfg, 11, initOpts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ref.eng.SwapWeights(ctx, bf16Rounded(w1), "1", false); err != nil {
		t.Fatal(err)
	}
	want1, _ := greedy(t, ref)
	if slices.Equal(want1, before) {
		t.Fatal("the test needs weights that change the greedy tokens")
	}

	// The proxy must know the hub's port before f2 joins: listen first, then form the group.
	h, err := weightsync.Listen(protocol.WeightSyncTCP, "127.0.0.1:0", "", "test-group", 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, h.Request.Addr())
	group := joinWith(t, h, fs, []int{0, proxy.port()})

	errs, berr := group.update(w1, "1", fs)
	if berr != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("update 1: broadcast %v, servers %v", berr, errs)
	}
	for i, f := range fs {
		got, v := greedy(t, f)
		if !slices.Equal(got, want1) || v != "1" {
			t.Fatalf("sampler %d after update 1: tokens %v version %q, want %v version 1", i, got, v, want1)
		}
	}

	w2, err := gpu.NewRandomWeightsWith(cfg, 12, initOpts)
	if err != nil {
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	errs, berr = group.update(w2, "2", fs)
	select {
	case <-proxy.cut:
	default:
		t.Fatal("the proxy never cut the sampler off")
	}
	if berr == nil || errs[0] == nil || errs[1] == nil {
		t.Fatalf("update 2 with a sampler gone: broadcast %v, servers %v; want every rank to fail", berr, errs)
	}
	if !strings.Contains(errs[0].Error(), "old weights keep serving") {
		t.Fatalf("survivor's answer: %v", errs[0])
	}
	got, v := greedy(t, f1)
	if !slices.Equal(got, want1) || v != "1" {
		t.Fatalf("survivor after a failed update: tokens %v version %q, want version 1's %v", got, v, want1)
	}
	status, out, err := postJSON(f1.srv.URL, "/update_weights_from_distributed", protocol.DistributedTensors("test-group", nil))
	if err != nil || status != http.StatusBadRequest {
		t.Fatalf("update after leaving: %d %v %v", status, out, err)
	}
}

// joinWith forms the group h listens for: rank 0 and fs (rank i+1 each), fixture i dialing
// ports[i] instead of the trainer's port when it is non-zero.
func joinWith(t *testing.T, h *weightsync.Host, fs []*fixture, ports []int) *syncTrainer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(fs))
	for i, f := range fs {
		wg.Go(func() {
			req := h.Request
			req.RankOffset = 1 + i
			if ports[i] != 0 {
				req.MasterPort = ports[i]
			}
			status, out, err := postJSON(f.srv.URL, "/init_weights_update_group", req)
			if err == nil && (status != http.StatusOK || !*out.Success) {
				err = fmt.Errorf("init: %d %s", status, out.Message)
			}
			errs[i] = err
		})
	}
	c, err := h.Join(ctx)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { c.Close() })
	return &syncTrainer{comm: c, group: h.Request.GroupName}
}

// TestDistributedRefusals: what the server refuses, and that a refusal keeps the old weights and
// version; a refusal inside a group leaves it, so the trainer's broadcast fails instead of
// waiting for this rank.
func TestDistributedRefusals(t *testing.T) {
	cfg := gpu.TinyConfig()
	f := newFixture(t, cfg, nil, sampler.Config{})
	resp, err := http.Get(f.srv.URL + "/model_info")
	if err != nil {
		t.Fatal(err)
	}
	var info protocol.ModelInfo
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if !slices.Equal(info.WeightSync, []string{protocol.WeightSyncTCP}) {
		t.Fatalf("cpu sampler's weight_sync %v, want [tcp]", info.WeightSync)
	}
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"init: not json", "/init_weights_update_group", `{`, "init_weights_update_group"},
		{"init: rank 0", "/init_weights_update_group", `{"master_address":"127.0.0.1","master_port":1,"rank_offset":0,"world_size":2,"backend":"tcp"}`, "rank 0 is the trainer's"},
		{"init: nccl on cpu", "/init_weights_update_group", `{"master_address":"127.0.0.1","master_port":1,"rank_offset":1,"world_size":2}`, `not "nccl"`},
		{"update: no group", "/update_weights_from_distributed", `{"names":["model.norm.weight"],"dtypes":["bfloat16"],"shapes":[[64]]}`, "no weight-sync group"},
		{"update: malformed", "/update_weights_from_distributed", `{"names":["a"],"dtypes":[],"shapes":[]}`, "1 names, 0 dtypes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body json.RawMessage = []byte(tc.body)
			status, out, err := postJSON(f.srv.URL, tc.path, body)
			if err != nil || status != http.StatusBadRequest || *out.Success || !strings.Contains(out.Message, tc.want) {
				t.Fatalf("%d %+v %v, want 400 naming %q", status, out, err, tc.want)
			}
		})
	}
	// A join that nobody serves gives up within the timeout instead of hanging.
	slow := New(f.eng, Options{WeightSyncJoinTimeout: 200 * time.Millisecond})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	rec := postRecorder(slow, "/init_weights_update_group", `{"master_address":"127.0.0.1","master_port":`+strconv.Itoa(port)+`,"rank_offset":1,"world_size":2,"backend":"tcp"}`)
	if rec.status != http.StatusBadRequest || !strings.Contains(rec.body, "within 200ms") {
		t.Fatalf("join without a trainer: %d %s", rec.status, rec.body)
	}

	// Tensors that are not the model's: refused before any byte is received, the group left.
	h, err := weightsync.Listen(protocol.WeightSyncTCP, "127.0.0.1:0", "", "g", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	group := joinWith(t, h, []*fixture{f}, []int{0})
	w, _ := gpu.NewRandomWeightsWith(cfg, 3, initOpts)
	buf, ts, _ := weightsync.HostSource(weightsOf{w})()
	bad := slices.Clone(ts)
	bad[len(bad)-1].Shape = []int{bad[len(bad)-1].Shape[0] + 1}
	req := protocol.DistributedTensors("g", weightsync.ProtocolTensors(bad))
	done := make(chan error, 1)
	go func() { done <- weightsync.Broadcast(group.comm, buf, ts) }()
	status, out, err := postJSON(f.srv.URL, "/update_weights_from_distributed", req)
	if err != nil || status != http.StatusBadRequest || !strings.Contains(out.Message, "shape") || !strings.Contains(out.Message, "left the weight-sync group") {
		t.Fatalf("mismatched shapes: %d %+v %v", status, out, err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the trainer's broadcast succeeded without the server")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the trainer's broadcast still waits for a server that refused")
	}
	if v := f.eng.Stats().Version; v != "0" {
		t.Fatalf("version after refusals %q, want 0", v)
	}
}

type recorded struct {
	status int
	body   string
}

// postRecorder serves one POST with s's handler in this goroutine.
func postRecorder(s *Server, path, body string) recorded {
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	return recorded{rec.Code, rec.Body.String()}
}
