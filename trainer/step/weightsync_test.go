package step

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/gpu/sampler"
	"tau2rl/gpu/sampler/httpapi"
	"tau2rl/gpu/weightsync"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
)

// recDecoder is the pure-Go decoder, keeping a copy of the weights it last took, so that a test
// can compare them with a checkpoint bit for bit.
type recDecoder struct {
	*cpu.Decoder
	mu   sync.Mutex
	last *gpu.Weights
}

func (d *recDecoder) LoadWeights(w *gpu.Weights) error {
	if err := d.Decoder.LoadWeights(w); err != nil {
		return err
	}
	d.mu.Lock()
	d.last = w.Clone()
	d.mu.Unlock()
	return nil
}

func (d *recDecoder) weights() *gpu.Weights { d.mu.Lock(); defer d.mu.Unlock(); return d.last }

// syncSampler is a tau2-sampler (engine and HTTP API, pure-Go decoder) on loopback.
type syncSampler struct {
	eng *sampler.Engine
	srv *httptest.Server
	dec *recDecoder

	mu        sync.Mutex
	calls     map[string]int // requests by path
	stallJoin bool           // /init_weights_update_group never answers (a join that hangs)
}

func (s *syncSampler) requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

func newSyncSampler(t *testing.T, cfg gpu.Config, seed uint64) *syncSampler {
	t.Helper()
	w, err := gpu.NewRandomWeightsWith(cfg, seed, gpu.InitOptions{Std: 0.5, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	d, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	dec := &recDecoder{Decoder: d, last: w.Clone()}
	eng, err := sampler.New(dec, sampler.Config{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = eng.Run(context.Background()) }()
	s := &syncSampler{eng: eng, dec: dec, calls: map[string]int{}}
	h := httpapi.New(eng, httpapi.Options{ModelName: "tiny"}).Handler()
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[r.URL.Path]++
		stall := s.stallJoin && r.URL.Path == "/init_weights_update_group"
		s.mu.Unlock()
		if stall {
			io.Copy(io.Discard, r.Body) // so that the server notices the client going away
			<-r.Context().Done()
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { s.srv.Close(); eng.Close(); <-eng.Done() })
	return s
}

// greedyAt is the sampler's greedy continuation of a fixed prompt and the version it reports.
func greedyAt(url string) ([]int32, string, error) {
	resp, err := http.Post(url+"/generate", "application/json",
		bytes.NewReader([]byte(`{"input_ids":[3,1,4,1,5,9,2,6],"sampling_params":{"max_new_tokens":12,"temperature":0}}`)))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out protocol.GenerateResponse
	if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("/generate: %d %s", resp.StatusCode, data)
	}
	return out.OutputIDs, out.MetaInfo.WeightVersion, nil
}

// syncReloader is the trainer's reloader of servers urls in mode over a tcp weight-sync group
// whose rank 0 broadcasts be's weights.
func syncReloader(t *testing.T, mode string, be gpu.Backend, urls ...string) llm.Reloader {
	t.Helper()
	var rs llm.MultiReloader
	for _, u := range urls {
		ecfg := llm.DefaultEndpointConfig()
		ecfg.BaseURL, ecfg.MaxRetries = u, 0
		ep, err := llm.NewEndpoint(ecfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, llm.NewSGLangReloader(ep, llm.SGLangReloadOptions{}))
	}
	r, err := llm.WithReloadMode(rs, mode, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := weightsync.NewTrainer(protocol.WeightSyncTCP, "127.0.0.1:0", "", "tau2rl-test", 0, weightsync.HostSource(be.(gpu.WeightExporter)))
	if err != nil {
		t.Fatal(err)
	}
	if r, err = llm.WithWeightSync(r, mode, ws, nil, nil); err != nil {
		t.Fatal(err)
	}
	return r
}

// checkingReloader checks, after every reload the inner reloader reports done, that every sampler
// holds the bf16 checkpoint of the trainer's weights of that version bit for bit (and the
// trainer's own checkpoint, when the version has one) and generates what a sampler loaded from it
// generates, under that version.
type checkingReloader struct {
	t        *testing.T
	inner    llm.Reloader
	be       gpu.Backend
	samplers []*syncSampler
	ref      *syncSampler
	dir      string

	mu      sync.Mutex
	checked []int64
	last    *gpu.Weights // the checkpoint of the last version reloaded
}

func (c *checkingReloader) ReloadsFromMemory() bool {
	m, ok := c.inner.(MemoryReloader)
	return ok && m.ReloadsFromMemory()
}

func (c *checkingReloader) LoadWeights(ctx context.Context, path string, version int64) error {
	if err := c.inner.LoadWeights(ctx, path, version); err != nil {
		c.t.Logf("reload of version %d: %v", version, err)
		return err
	}
	if err := c.check(ctx, path, version); err != nil {
		c.t.Errorf("version %d: %v", version, err)
	}
	return nil
}

func (c *checkingReloader) check(ctx context.Context, path string, version int64) error {
	w, err := c.be.(gpu.WeightExporter).Weights()
	if err != nil {
		return err
	}
	dir := filepath.Join(c.dir, fmt.Sprintf("bf16-v%d", version))
	if err := w.Save(dir, gpu.BF16); err != nil {
		return err
	}
	ck, err := gpu.LoadWeights(dir)
	if err != nil {
		return err
	}
	want := []*gpu.Weights{ck}
	if path != "" {
		own, err := gpu.LoadWeights(path)
		if err != nil {
			return err
		}
		want = append(want, own)
	}
	if err := c.ref.eng.SwapWeights(ctx, ck, llm.VersionString(version), false); err != nil {
		return err
	}
	ref, _, err := greedyAt(c.ref.srv.URL)
	if err != nil {
		return err
	}
	for i, s := range c.samplers {
		for _, x := range want {
			if err := sameBits(s.dec.weights(), x); err != nil {
				return fmt.Errorf("sampler %d: %w", i, err)
			}
		}
		got, v, err := greedyAt(s.srv.URL)
		if err != nil {
			return err
		}
		if !slices.Equal(got, ref) || v != llm.VersionString(version) {
			return fmt.Errorf("sampler %d: greedy tokens %v under version %q, a sampler loaded from the checkpoint: %v under %d", i, got, v, ref, version)
		}
	}
	c.mu.Lock()
	c.checked, c.last = append(c.checked, version), ck
	c.mu.Unlock()
	return nil
}

// sameBits reports the first parameter element where a and b differ in any bit.
func sameBits(a, b *gpu.Weights) error {
	for _, s := range gpu.ParamSpecs(b.Config) {
		x, y := a.Tensors[s.Name], b.Tensors[s.Name]
		if len(x) != len(y) {
			return fmt.Errorf("%s: %d elements, want %d", s.Name, len(x), len(y))
		}
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return fmt.Errorf("%s[%d] = %v, the checkpoint's %v", s.Name, i, x[i], y[i])
			}
		}
	}
	return nil
}

// TestWeightSyncGroupEndToEnd: a pure-Go trainer and two tau2-samplers (in-process HTTP servers
// on loopback) with reload.mode=distributed form a weight-sync group over gpu/collective's TCP
// hub at the first reload; after every step each sampler holds exactly the bf16 checkpoint of
// the trainer's weights of that version and generates what a sampler loaded from it generates.
// Versions without a checkpoint (checkpoint.every=2) go by the group too, published in_memory.
func TestWeightSyncGroupEndToEnd(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 3
	cfg.Checkpoint.Every = 2
	cfg.Checkpoint.DType = string(gpu.BF16)
	be := newBackend(t)
	mc := be.Config()
	samplers := []*syncSampler{newSyncSampler(t, mc, 21), newSyncSampler(t, mc, 22)}
	chk := &checkingReloader{t: t, be: be, samplers: samplers, ref: newSyncSampler(t, mc, 23), dir: t.TempDir(),
		inner: syncReloader(t, llm.ReloadDistributed, be, samplers[0].srv.URL, samplers[1].srv.URL)}
	rec := &recorder{}
	tr, err := New(cfg, Deps{Backend: be, Source: newMemSource(groupMessages(t, []string{"0", "1", "2", "3", "4", "5"}, 0, 0)),
		Reloader: chk, Versions: rec})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	var published, inMemory []int64
	for _, v := range rec.versions {
		published = append(published, v.Version)
		if v.InMemory {
			inMemory = append(inMemory, v.Version)
		}
	}
	// v0 goes with a checkpoint (the first reload sorts the servers), v1 and v3 from memory,
	// v2 and v3 (the end) with checkpoints.
	if !slices.Equal(chk.checked, published) || !slices.Equal(published, []int64{0, 1, 2, 3, 3}) || !slices.Equal(inMemory, []int64{1, 3}) {
		t.Fatalf("checked %v, published %v (in memory %v); want every published version checked: [0 1 2 3 3], in memory [1 3]", chk.checked, published, inMemory)
	}
	if n := chk.inner.(*llm.SyncReloader).Members(); n != 2 {
		t.Fatalf("%d servers in the group, want 2", n)
	}
}

// TestWeightSyncDeadSamplerFailsReload: after the group's first reload one sampler dies; the
// next reload fails (the broadcast and the survivor's update fail: no version is published after
// v0), the survivor keeps version 0's weights whole, and later reloads fail at forming a new
// group, quickly, instead of blocking the trainer.
func TestWeightSyncDeadSamplerFailsReload(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 3
	cfg.Checkpoint.Every = 1
	cfg.Checkpoint.DType = string(gpu.BF16)
	be := newBackend(t)
	mc := be.Config()
	alive, dead := newSyncSampler(t, mc, 21), newSyncSampler(t, mc, 22)
	chk := &checkingReloader{t: t, be: be, samplers: []*syncSampler{alive, dead}, ref: newSyncSampler(t, mc, 23), dir: t.TempDir(),
		inner: syncReloader(t, llm.ReloadDistributed, be, alive.srv.URL, dead.srv.URL)}
	kill := &killAfterFirst{checkingReloader: chk, kill: func() { dead.srv.CloseClientConnections(); dead.srv.Close() }}
	rec := &recorder{}
	tr, err := New(cfg, Deps{Backend: be, Source: newMemSource(groupMessages(t, []string{"0", "1", "2", "3", "4", "5"}, 0, 0)),
		Reloader: kill, Versions: rec})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	var published []int64
	for _, v := range rec.versions {
		published = append(published, v.Version)
	}
	if !slices.Equal(published, []int64{0}) || len(kill.errs) != 3 {
		t.Fatalf("published %v with reload errors %v; want only version 0, and a failed reload at each of the 3 steps", published, kill.errs)
	}
	if err := sameBits(alive.dec.weights(), chk.last); err != nil {
		t.Fatalf("the surviving sampler does not hold version 0 whole: %v", err)
	}
	if _, v, err := greedyAt(alive.srv.URL); err != nil || v != "0" {
		t.Fatalf("the survivor serves version %q (%v), want 0", v, err)
	}
}

// killAfterFirst runs kill once the first reload succeeded, and records the later reloads' errors.
type killAfterFirst struct {
	*checkingReloader
	kill   func()
	killed bool
	errs   []error
}

func (k *killAfterFirst) LoadWeights(ctx context.Context, path string, version int64) error {
	err := k.checkingReloader.LoadWeights(ctx, path, version)
	if k.killed {
		k.errs = append(k.errs, err)
	} else if err == nil {
		k.kill()
		k.killed = true
	}
	return err
}

// TestWeightSyncAutoChoiceAndFallback: under reload.mode=auto a tau2-sampler (weight_sync lists
// tcp) joins the group while an SGLang server without the field (the scripted one) reloads from
// disk, in the same reloads. When the sampler then leaves the group (it refused a malformed
// update), the next reload's group update fails and auto reloads the sampler from that version's
// checkpoint instead, and from disk from then on: every version is still published, and the
// sampler holds each one's checkpoint exactly.
func TestWeightSyncAutoChoiceAndFallback(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 3
	cfg.Checkpoint.Every = 1
	cfg.Checkpoint.DType = string(gpu.BF16)
	be := newBackend(t)
	ts := newSyncSampler(t, be.Config(), 21)
	sg, err := llmtest.NewServer(tokenizertest.Qwen3(t), llmtest.Constant(llmtest.Reply{Content: "ok"}))
	if err != nil {
		t.Fatal(err)
	}
	defer sg.Close()
	r := syncReloader(t, llm.ReloadAuto, be, ts.srv.URL, sg.URL)
	chk := &checkingReloader{t: t, be: be, samplers: []*syncSampler{ts}, ref: newSyncSampler(t, be.Config(), 23), dir: t.TempDir(), inner: r}
	leave := &afterVersion{Reloader: chk, at: 1, do: func() {
		resp, err := http.Post(ts.srv.URL+"/update_weights_from_distributed", "application/json", bytes.NewReader([]byte(`{"names":["x"]}`)))
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}}
	rec := &recorder{}
	tr, err := New(cfg, Deps{Backend: be, Source: newMemSource(groupMessages(t, []string{"0", "1", "2", "3", "4", "5"}, 0, 0)),
		Reloader: leave, Versions: rec})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	var published []int64
	for _, v := range rec.versions {
		published = append(published, v.Version)
	}
	if !slices.Equal(published, []int64{0, 1, 2, 3}) || !slices.Equal(chk.checked, published) {
		t.Fatalf("published %v, checked %v; want every version 0-3 published and checked", published, chk.checked)
	}
	// v0 and v1 by the group; v2's group update fails (the sampler left), so v2 and v3 from disk.
	if got := [3]int{ts.requests("/init_weights_update_group"), ts.requests("/update_weights_from_distributed"), ts.requests("/update_weights_from_disk")}; got != [3]int{1, 4, 2} {
		t.Fatalf("sampler: %d joins, %d distributed updates (one the malformed one), %d disk reloads; want 1, 4, 2", got[0], got[1], got[2])
	}
	if n := sg.Requests("/update_weights_from_disk"); n != 4 || sg.Requests("/init_weights_update_group") != 0 {
		t.Fatalf("SGLang server: %d disk reloads, %d joins; want 4 and 0", n, sg.Requests("/init_weights_update_group"))
	}
}

// afterVersion runs do once, after version at was reloaded.
type afterVersion struct {
	llm.Reloader
	at   int64
	do   func()
	done bool
}

func (a *afterVersion) LoadWeights(ctx context.Context, path string, version int64) error {
	err := a.Reloader.LoadWeights(ctx, path, version)
	if version == a.at && !a.done {
		a.done = true
		a.do()
	}
	return err
}

// TestWeightSyncJoinTimesOut: a server whose join never completes (its answer never comes) makes
// the reload fail after reload.sync.join_timeout with an error that says so, instead of blocking
// the trainer; the other server keeps its weights and version.
func TestWeightSyncJoinTimesOut(t *testing.T) {
	be := newBackend(t)
	ok, stuck := newSyncSampler(t, be.Config(), 21), newSyncSampler(t, be.Config(), 22)
	stuck.stallJoin = true
	r := syncReloader(t, llm.ReloadDistributed, be, ok.srv.URL, stuck.srv.URL).(*llm.SyncReloader)
	r.JoinTimeout = 300 * time.Millisecond
	t0 := time.Now()
	err := r.LoadWeights(context.Background(), "", 1)
	if err == nil || !strings.Contains(err.Error(), "did not form within 300ms") {
		t.Fatalf("reload with a stuck join: %v", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("the reload took %s", d)
	}
	if _, v, err := greedyAt(ok.srv.URL); err != nil || v != "0" {
		t.Fatalf("the other server serves version %q (%v), want its own 0", v, err)
	}
}
