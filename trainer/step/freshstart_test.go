package step

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"tau2rl/gpu"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/protocol"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"tau2rl/schemas"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/admission"
	"tau2rl/trainer/trajtest"
)

// loopProducer stands in for tau2-producer between the trainer and the scripted servers: it
// follows the published policy versions, and for every rollout request generates each call of
// the group's episodes on the servers (SGLang /generate or vLLM /v1/completions through the
// llm policy) and labels the call's tokens with the versions the server reported, by
// llm.TokenVersions as the producer does. The episodes' token ids are trajtest's (the scripted
// server answers in Qwen3 ids, outside the tiny test model's vocabulary); their versions are
// the servers'.
type loopProducer struct {
	t       *testing.T
	pol     llm.Policy
	out     *memSource
	servers []*llmtest.Server

	mu       sync.Mutex
	current  int64 // latest published policy version
	versions []schemas.PolicyVersion
	// served is what every server reported (weight version, model path) when the first
	// request arrived; tokens are the versions of the first request's tokens.
	served []string
	tokens []int64
	offset int64
}

func (p *loopProducer) PublishVersion(_ context.Context, v schemas.PolicyVersion) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.versions = append(p.versions, v)
	p.current = max(p.current, v.Version)
	return nil
}

func (p *loopProducer) PublishRequests(ctx context.Context, reqs []schemas.RolloutRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	first := p.served == nil
	if first {
		for _, s := range p.servers {
			p.served = append(p.served, fmt.Sprintf("version %s from %q", s.WeightVersion(), s.ModelPath()))
		}
	}
	for i, req := range reqs {
		o := trajtest.Default()
		o.Version, o.RequestID = p.current, req.RequestID
		trajs, err := trajtest.Group(o, req.TaskID, uint64(p.offset)+1, trajtest.Rewards(req.GroupSize))
		if err != nil {
			return err
		}
		for _, tr := range trajs {
			for k := range tr.Calls {
				c := &tr.Calls[k]
				res, err := p.pol.Generate(ctx, llm.GenerateRequest{InputIDs: []int32{9707, 11, 1879}, MaxNewTokens: 16})
				if err != nil {
					return fmt.Errorf("generate: %w", err)
				}
				vs := llm.TokenVersions(res, p.current)
				if len(vs) == 0 {
					return fmt.Errorf("the server generated no token")
				}
				if first && i == 0 {
					p.tokens = append(p.tokens, vs...)
				}
				c.VersionRuns = schemas.UniformVersion(vs[len(vs)-1], len(c.CompletionTokens))
			}
			if err := tr.Validate(); err != nil {
				return err
			}
		}
		p.out.msgs <- Message{Trajectories: trajs, Topic: "traj", Offset: p.offset}
		p.offset++
	}
	return nil
}

// TestFreshStartServesTheTrainersVersion: a trainer that starts fresh reloads the servers with
// its initial weights under its initial version (0) before it issues a rollout request, so the
// first episodes' tokens carry version 0 and the first step's staleness_mean is 0 with no token
// ahead of the trainer. The servers start at version 557, as tau2-sampler does when it serves an
// SFT checkpoint at step 557. Before, nothing was reloaded until the first step's checkpoint: the
// first requests' tokens carried 557 and steps.jsonl logged staleness_mean −557.
func TestFreshStartServesTheTrainersVersion(t *testing.T) {
	const gpuID = "GPU-11111111-2222-3333-4444-555555555555"
	ipc := llm.IPCSource(func() (protocol.UpdateWeightsFromIPCRequest, error) {
		var h [protocol.IPCHandleBytes]byte
		return protocol.NewUpdateWeightsFromIPC(h, gpuID, []protocol.IPCTensor{{Name: "model.norm.weight", DType: "bfloat16", Shape: []int64{4}}}, 8), nil
	})
	for _, tc := range []struct {
		name      string
		backend   string // llm.BackendSGLang or llm.BackendVLLM
		mode      string
		servers   int
		ipc       bool // the servers take the weights by CUDA IPC (tau2-sampler on the trainer's GPU)
		modelPath bool // the backend was loaded from model.path (else a random initialisation)
		// from is where the servers took the initial weights: "model.path", "initial" (written
		// for them to checkpoint.dir/initial) or "" (memory).
		from string
	}{
		{name: "model.path, from disk", backend: llm.BackendSGLang, mode: llm.ReloadAuto, servers: 1, modelPath: true, from: "model.path"},
		{name: "random init, weights written", backend: llm.BackendSGLang, mode: llm.ReloadDisk, servers: 1, from: "initial"},
		{name: "CUDA IPC", backend: llm.BackendSGLang, mode: llm.ReloadIPC, servers: 1, ipc: true, modelPath: true, from: ""},
		{name: "three servers", backend: llm.BackendSGLang, mode: llm.ReloadAuto, servers: 3, modelPath: true, from: "model.path"},
		// vLLM answers report no version: the tokens carry the producer's, published only once
		// the servers serve model.path.
		{name: "vLLM", backend: llm.BackendVLLM, mode: llm.ReloadAuto, servers: 2, modelPath: true, from: "model.path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.MaxSteps = 1
			be := newBackend(t)
			var initial string
			if tc.modelPath {
				initial = filepath.Join(t.TempDir(), "sft-v557")
				if err := be.Save(initial, gpu.F32); err != nil {
					t.Fatal(err)
				}
			}
			var eps []llm.EndpointConfig
			var servers []*llmtest.Server
			for range tc.servers {
				s, err := llmtest.NewServer(tokenizertest.Qwen3(t), llmtest.Constant(llmtest.Reply{Content: "ok"}), llmtest.WithWeightVersion("557"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				if tc.ipc {
					s.ServeIPC(gpuID)
				}
				ec := llm.DefaultEndpointConfig()
				ec.BaseURL = s.URL
				eps = append(eps, ec)
				servers = append(servers, s)
			}
			pol, reloader, err := llm.NewPolicy(llm.PolicyConfig{Backend: tc.backend, Model: "scripted-qwen3", Endpoints: eps}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var src llm.IPCSource
			if tc.ipc {
				src = ipc
			}
			if reloader, err = llm.WithReloadMode(reloader, tc.mode, src, nil); err != nil {
				t.Fatal(err)
			}
			out := &memSource{msgs: make(chan Message, 64)}
			prod := &loopProducer{t: t, pol: pol, out: out, servers: servers}
			tasks := []admission.Task{{Domain: "airline", Split: "train", ID: "0"}, {Domain: "airline", Split: "train", ID: "1"}}
			adm, err := admission.New(cfg.Admission, tasks, cfg.Group.Size, cfg.BatchSize, cfg.MaxHeadOffpolicyness)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := NewMetrics(nil)
			tr, err := New(cfg, Deps{Backend: be, Source: out, Reloader: reloader, Versions: prod, Requests: prod, Admission: adm,
				InitialWeights: initial, Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			runTrainer(t, tr)

			want := map[string]string{"model.path": initial, "initial": filepath.Join(cfg.Checkpoint.Dir, InitialDir), "": ""}[tc.from]
			prod.mu.Lock()
			defer prod.mu.Unlock()
			for i, got := range prod.served {
				if w := fmt.Sprintf("version 0 from %q", want); got != w {
					t.Errorf("server %d served %s when the first request was issued, want %s", i, got, w)
				}
			}
			if len(prod.tokens) == 0 || slices.ContainsFunc(prod.tokens, func(v int64) bool { return v != 0 }) {
				t.Errorf("the first request's tokens carry versions %v, want 0", prod.tokens)
			}
			if len(prod.versions) == 0 || prod.versions[0].Version != 0 || prod.versions[0].CheckpointPath != want || prod.versions[0].InMemory != (want == "") {
				t.Errorf("first published version %+v, want 0 at %q", prod.versions, want)
			}
			recs, err := steplog.Read(cfg.Checkpoint.Dir)
			if err != nil || len(recs) != 1 {
				t.Fatalf("steps.jsonl: %d records, %v", len(recs), err)
			}
			if mean, ahead := recs[0].Metrics["staleness_mean"], recs[0].Metrics["tokens_ahead_of_trainer"]; mean != 0 || ahead != 0 {
				t.Errorf("step 1: staleness_mean %v, tokens_ahead_of_trainer %v; want 0 and 0", mean, ahead)
			}
			if n := counterValue(t, m.ReloadErrors); n != 0 {
				t.Errorf("%v failed reloads", n)
			}
		})
	}
}

// TestTokensAheadOfTrainerCounted: tokens whose version is newer than the trainer's (servers that
// were never reloaded by it: here no reloader at all, and episodes sampled at 557) are counted
// in steps.jsonl's tokens_ahead_of_trainer and the tokens_ahead_of_trainer_total metric and
// warned about once, and left out of staleness_mean instead of averaging −557 into it.
func TestTokensAheadOfTrainerCounted(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 2
	var logBuf syncBuffer
	m, _ := NewMetrics(nil)
	msgs := groupMessages(t, []string{"0", "1", "2", "3"}, 0, 557)
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: newMemSource(msgs), Metrics: m,
		Log: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	runTrainer(t, tr)
	recs, err := steplog.Read(cfg.Checkpoint.Dir)
	if err != nil || len(recs) != 2 {
		t.Fatalf("steps.jsonl: %d records, %v", len(recs), err)
	}
	var total float64
	for _, r := range recs {
		ahead, mean := r.Metrics["tokens_ahead_of_trainer"], r.Metrics["staleness_mean"]
		if ahead != r.Metrics["loss_tokens"] || ahead == 0 || mean != 0 || r.Metrics["staleness_max"] != 0 {
			t.Errorf("step %d: tokens_ahead_of_trainer %v of %v loss tokens, staleness_mean %v max %v; want all ahead, staleness 0",
				r.Step, ahead, r.Metrics["loss_tokens"], mean, r.Metrics["staleness_max"])
		}
		total += ahead
	}
	if got := counterValue(t, m.TokensAhead); got != total {
		t.Errorf("tokens_ahead_of_trainer_total %v, want %v", got, total)
	}
	if n := strings.Count(logBuf.String(), "newer than the trainer's"); n != 1 {
		t.Errorf("warned %d times, want once:\n%s", n, logBuf.String())
	}
}
