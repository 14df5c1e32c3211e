package loadgen

import (
	"context"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/gpu/sampler"
	"tau2rl/gpu/sampler/httpapi"
)

func tinyShape() Shape {
	return Shape{Groups: 2, Samples: 3, Turns: 3, Sys: 40, Task: 9, Gen: 6, GenSD: 2, Reply: 5, Vocab: 64, Seed: 7}
}

// serve runs a pure-Go engine on the tiny model behind the real HTTP layer.
func serve(t testing.TB, bs int) (*sampler.Engine, string) {
	t.Helper()
	w, err := gpu.NewRandomWeightsWith(gpu.TinyConfig(), 5, gpu.InitOptions{Std: 0.5, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: bs, NumBlocks: 512})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := sampler.New(dec, sampler.Config{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = eng.Run(context.Background()) }()
	srv := httptest.NewServer(httpapi.New(eng, httpapi.Options{ModelName: "tiny"}).Handler())
	t.Cleanup(func() { srv.Close(); eng.Close(); <-eng.Done() })
	return eng, srv.URL
}

// TestRunAgainstSampler plays a small τ²-shaped load against tau2-sampler's HTTP API (pure-Go
// backend) and checks what it reports: every call, the exact token counts of the drawn load,
// prefix-cache hits on the shared prefixes and the history, KV use, and floors that order as
// they must (sharing the prefixes can only lower the bytes read).
func TestRunAgainstSampler(t *testing.T) {
	_, url := serve(t, 4)
	s := tinyShape()
	c := &SGLang{BaseURL: url, BlockSize: 4}
	r, err := Run(context.Background(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if r.NumCalls != s.Conversations()*s.Turns {
		t.Fatalf("calls %d, want %d", r.NumCalls, s.Conversations()*s.Turns)
	}
	// Each conversation's prompts grow by exactly what it generated plus the reply.
	last := map[int]CallStat{}
	var out int64
	for _, c := range r.Calls {
		out += int64(c.Output)
		if c.Turn == 0 && c.Prompt != s.Sys+s.Task {
			t.Fatalf("first prompt %d tokens, want %d", c.Prompt, s.Sys+s.Task)
		}
		if p, ok := last[c.Conversation]; ok && c.Turn > p.Turn && c.Turn == p.Turn+1 && c.Prompt != p.Prompt+p.Output+s.Reply {
			t.Fatalf("conversation %d turn %d: prompt %d, want %d", c.Conversation, c.Turn, c.Prompt, p.Prompt+p.Output+s.Reply)
		}
		if c.Turn > last[c.Conversation].Turn || c.Turn == 0 {
			last[c.Conversation] = c
		}
		if c.Output < 1 || c.Output > 3*s.Gen {
			t.Fatalf("output %d outside [1, %d]", c.Output, 3*s.Gen)
		}
	}
	if out != r.OutputTokens || r.OutputTokPerS <= 0 || r.CallsPerS <= 0 || r.P50MS <= 0 || r.P99MS < r.P50MS {
		t.Fatalf("result %+v", r)
	}
	// The shared system prefix alone is 40 of the first prompt's 49 tokens; later turns hit their
	// whole history but a partial block.
	if r.CachedShare < 0.5 || r.CachedShare > 1 {
		t.Fatalf("cached share %.3f, want the prefixes and histories to hit", r.CachedShare)
	}
	if r.KVTotalTokens != 512*4 || r.KVPeakTokens <= 0 {
		t.Logf("KV sampled: peak %d of %d (the run may be too short to sample)", r.KVPeakTokens, r.KVTotalTokens)
	}
	hw := Hardware{CopyBytesPerS: 3e12, MatmulFLOPs: 9e14}
	f := Floors(gpu.TinyConfig(), r, hw)
	if !(f.SharedTokPerS >= f.PerSeqTokPerS && f.PerSeqTokPerS > 0 && f.KVBytesShared < f.KVBytesPerSeq) {
		t.Fatalf("floors %+v", f)
	}
	if f.KVTokensShared >= f.KVTokensPerSeq {
		t.Fatalf("KV needed shared %d ≥ unshared %d", f.KVTokensShared, f.KVTokensPerSeq)
	}
	t.Log("\n" + Summary(r, f, hw))

	// The same seed draws the same load (two servers compared get the same prompts).
	r2, err := Run(context.Background(), &Engine{E: nil}, Shape{}) // invalid shape: rejected before any call
	if err == nil || r2 != nil {
		t.Fatal("an empty shape ran")
	}
}

// TestSameLoadTwice: the load is a function of the seed (prompt lengths, generation lengths), so
// two servers — or two builds — are measured on the same work.
func TestSameLoadTwice(t *testing.T) {
	eng, _ := serve(t, 8)
	s := tinyShape()
	a, err := Run(context.Background(), &Engine{E: eng, BlockSize: 8}, s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), &Engine{E: eng, BlockSize: 8}, s)
	if err != nil {
		t.Fatal(err)
	}
	key := func(r *Result) map[[2]int][2]int {
		m := map[[2]int][2]int{}
		for _, c := range r.Calls {
			m[[2]int{c.Conversation, c.Turn}] = [2]int{c.Prompt, c.Output}
		}
		return m
	}
	ka, kb := key(a), key(b)
	for k, v := range ka {
		if kb[k] != v {
			t.Fatalf("call %v: %v then %v", k, v, kb[k])
		}
	}
	if b.CachedShare <= a.CachedShare {
		t.Fatalf("second run cached share %.3f ≤ first %.3f: the prefix cache should hold the first run's prompts", b.CachedShare, a.CachedShare)
	}
}

// TestFloorsByHand checks Floors against a load small enough to count by hand.
func TestFloorsByHand(t *testing.T) {
	cfg := gpu.TinyConfig() // 2 layers × 2 KV heads × 16 dims: 256 bytes of bf16 K+V per token
	kvB := float64(cfg.KVBytesPerToken(2))
	if kvB != 2*2*2*16*2 {
		t.Fatalf("kv bytes per token %v", kvB)
	}
	s := Shape{Groups: 1, Samples: 2, Turns: 1, Sys: 10, Task: 2, Gen: 3, Reply: 0, Vocab: 64}
	r := &Result{Shape: s, Wall: time.Second, OutputTokens: 6, Calls: []CallStat{
		{Conversation: 0, Prompt: 12, Output: 3, Cached: 8},
		{Conversation: 1, Prompt: 12, Output: 3, Cached: 12},
	}}
	var wb float64
	for _, p := range gpu.ParamSpecs(cfg) {
		wb += 2 * float64(p.Size())
	}
	hw := Hardware{CopyBytesPerS: 1e9, MatmulFLOPs: 1e12}
	f := Floors(cfg, r, hw)
	// rows see 12, 13, 14 positions, twice; shared: 0, 1, 2 own positions twice plus 12 prefix
	// positions once per step, 3 steps.
	perSeq := 2 * (12 + 13 + 14) * kvB
	shared := 2*(0+1+2)*kvB + 3*12*kvB
	if f.Steps != 3 || f.KVBytesPerSeq != perSeq || f.KVBytesShared != shared {
		t.Fatalf("steps %v, per-seq %v (want %v), shared %v (want %v)", f.Steps, f.KVBytesPerSeq, perSeq, f.KVBytesShared, shared)
	}
	if math.Abs(f.DecodePerSeqS-(3*wb+perSeq)/1e9) > 1e-12 || f.PrefillNewTokens != 4 {
		t.Fatalf("decode %v, prefill tokens %d", f.DecodePerSeqS, f.PrefillNewTokens)
	}
	if f.KVTokensPerSeq != 30 || f.KVTokensShared != 12+3+3 {
		t.Fatalf("KV tokens needed %d / %d", f.KVTokensPerSeq, f.KVTokensShared)
	}
	if got := Percentile([]float64{5, 1, 4, 2, 3}, 0.5); got != 3 {
		t.Fatalf("p50 %v", got)
	}
	if got := Percentile([]float64{5, 1, 4, 2, 3}, 0.99); got != 5 {
		t.Fatalf("p99 %v", got)
	}
}

// BenchmarkTau2Load runs a short τ²-shaped load through the engine in process on the pure-Go
// backend (CI's exercise of the benchmark; `make gpu-bench` runs the real one on the GPU).
func BenchmarkTau2Load(b *testing.B) {
	for b.Loop() {
		eng, _ := serve(b, 4)
		r, err := Run(context.Background(), &Engine{E: eng, BlockSize: 4}, tinyShape())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.OutputTokPerS, "out-tok/s")
		b.ReportMetric(r.CachedShare, "cached-share")
	}
}
