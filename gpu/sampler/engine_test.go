package sampler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/lib/inference/tokenizer"
)

func tinyWeights(t testing.TB, seed uint64) *gpu.Weights {
	t.Helper()
	w, err := gpu.NewRandomWeightsWith(gpu.TinyConfig(), seed, gpu.InitOptions{Std: 0.5, NormJitter: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// startEngine runs an engine over a fresh pure-Go decoder until the test ends.
func startEngine(t testing.TB, w *gpu.Weights, kv gpu.KVCacheSpec, cfg Config) *Engine {
	t.Helper()
	dec, err := cpu.NewDecoder(w, kv)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(dec, cfg, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.Run(context.Background()) }()
	t.Cleanup(func() { e.Close(); <-e.Done() })
	return e
}

func seedPtr(s uint64) *uint64 { return &s }

// testRequests share prefixes (so the prefix cache matters), mix greedy and filtered sampling,
// and are long enough to span several blocks.
func testRequests() []Request {
	base := []int32{1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61, 3, 7, 11, 15, 19, 23}
	var rs []Request
	for i := range 6 {
		p := slices.Clone(base[:10+i*2])
		p = append(p, int32(i+2), int32(40+i))
		params := gpu.SampleParams{Temperature: 1, TopP: 1}
		switch i % 3 {
		case 1:
			params = gpu.SampleParams{Temperature: 0, TopP: 1}
		case 2:
			params = gpu.SampleParams{Temperature: 0.8, TopP: 0.9, TopK: 20, MinP: 0.01}
		}
		rs = append(rs, Request{ID: fmt.Sprint("r", i), Prompt: p, Params: params, MaxNewTokens: 12 + 3*i,
			Seed: seedPtr(uint64(100 + i)), IgnoreEOS: true})
	}
	return rs
}

// runAll submits every request at once and returns the results in request order.
func runAll(t testing.TB, e *Engine, rs []Request) []Result {
	t.Helper()
	out := make([]Result, len(rs))
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = e.Submit(context.Background(), r)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// runBatched holds the engine while every request is queued, so they are scheduled together
// (the batching and preemption tests must not depend on goroutine timing).
func runBatched(t *testing.T, e *Engine, rs []Request) []Result {
	t.Helper()
	ctx := context.Background()
	if err := e.Pause(ctx, PauseInPlace); err != nil {
		t.Fatal(err)
	}
	res := make(chan []Result)
	go func() { res <- runAll(t, e, rs) }()
	waitFor(t, e, "all queued", func(s Stats) bool { return s.Waiting == len(rs) })
	if err := e.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	return <-res
}

// sameOutputs compares tokens and log-probs exactly.
func sameOutputs(t *testing.T, name string, got, want []Result) {
	t.Helper()
	for i := range want {
		if !slices.Equal(got[i].OutputIDs, want[i].OutputIDs) || !slices.Equal(got[i].LogProbs, want[i].LogProbs) {
			t.Fatalf("%s: request %d\n got %v %v\nwant %v %v", name, i, got[i].OutputIDs, got[i].LogProbs, want[i].OutputIDs, want[i].LogProbs)
		}
		if got[i].Finish.Type != want[i].Finish.Type {
			t.Fatalf("%s: request %d finish %+v, want %+v", name, i, got[i].Finish, want[i].Finish)
		}
	}
}

// alone runs each request on its own fresh engine without a prefix cache: the reference.
func alone(t *testing.T, w *gpu.Weights, rs []Request) []Result {
	off := false
	var out []Result
	for _, r := range rs {
		e := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 32}, Config{PrefixCache: &off})
		out = append(out, runAll(t, e, []Request{r})...)
	}
	return out
}

// TestInvariances: a request's output does not depend on batching, the prefix cache, the block
// size, the step token budget (prefill chunking), or preemption when the cache runs out.
func TestInvariances(t *testing.T) {
	w := tinyWeights(t, 5)
	rs := testRequests()
	want := alone(t, w, rs)
	on, off := true, false
	for _, tc := range []struct {
		name    string
		kv      gpu.KVCacheSpec
		cfg     Config
		preempt bool
	}{
		{"batched", gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 64}, Config{PrefixCache: &off}, false},
		{"prefix-cache", gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 128}, Config{PrefixCache: &on}, false},
		{"block-1", gpu.KVCacheSpec{BlockSize: 1, NumBlocks: 512}, Config{}, false},
		{"block-16-chunked", gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 64}, Config{MaxStepTokens: 7}, false},
		{"max-running-2", gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 128}, Config{MaxRunning: 2}, false},
		// 14 blocks of 4 hold two or three of these requests at once: the rest are preempted.
		{"preemption", gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 14}, Config{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEngine(t, w, tc.kv, tc.cfg)
			got := runBatched(t, e, rs)
			sameOutputs(t, tc.name, got, want)
			retracts := 0
			for _, r := range got {
				retracts += r.Retractions
			}
			if tc.preempt != (retracts > 0) {
				t.Fatalf("%d retractions", retracts)
			}
			// Everything finished: only the prefix cache holds blocks.
			if err := e.Barrier(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := e.Stats()
			if st.UsedBlocks != st.CachedBlocks || st.Running+st.Waiting != 0 {
				t.Fatalf("after the run: %+v", st)
			}
			// The same requests again hit the prefix cache (when on) and give the same outputs.
			again := runBatched(t, e, rs)
			sameOutputs(t, tc.name+" again", again, want)
			if tc.cfg.PrefixCache == nil || *tc.cfg.PrefixCache {
				if again[5].CachedTokens == 0 {
					t.Fatalf("no prefix-cache hit on a repeated prompt: %+v", again[5])
				}
			} else if again[5].CachedTokens != 0 {
				t.Fatalf("cache off but %d cached tokens", again[5].CachedTokens)
			}
		})
	}
}

// TestPrefixCacheExtendsHistory: a τ² turn resends the previous prompt + completion + a new turn;
// everything up to the last full block of the earlier call comes from the cache.
func TestPrefixCacheExtendsHistory(t *testing.T) {
	w := tinyWeights(t, 5)
	e := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 64}, Config{})
	r1 := Request{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Params: gpu.SampleParams{TopP: 1}, MaxNewTokens: 9, IgnoreEOS: true}
	a := runAll(t, e, []Request{r1})[0]
	r2 := r1
	r2.Prompt = slices.Concat(r1.Prompt, a.OutputIDs, []int32{30, 31, 32})
	b := runAll(t, e, []Request{r2})[0]
	if want := (len(r1.Prompt) + len(a.OutputIDs) - 1) / 4 * 4; b.CachedTokens != want {
		t.Fatalf("cached %d of %d prompt tokens, want %d", b.CachedTokens, len(r2.Prompt), want)
	}
}

// waitFor spins until the engine's stats satisfy ok.
func waitFor(t *testing.T, e *Engine, what string, ok func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(e.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v", what, e.Stats())
		}
		runtime.Gosched()
	}
}

// waitSteps spins until the engine has taken n steps.
func waitSteps(t *testing.T, e *Engine, n int) {
	t.Helper()
	waitFor(t, e, fmt.Sprint(n, " steps"), func(s Stats) bool { return s.Steps >= n })
}

// TestPauseResume: pausing mid-generation (keeping the KV or retracting it) and resuming without
// a weight change gives the same output.
func TestPauseResume(t *testing.T) {
	w := tinyWeights(t, 5)
	rs := testRequests()
	for i := range rs {
		rs[i].MaxNewTokens = 400
	}
	want := alone(t, w, rs[:3])
	for _, mode := range []string{PauseInPlace, PauseRetract} {
		t.Run(mode, func(t *testing.T) {
			e := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 512}, Config{})
			var got []Result
			done := make(chan struct{})
			go func() { got = runBatched(t, e, rs[:3]); close(done) }()
			waitSteps(t, e, 20)
			ctx := context.Background()
			if err := e.Pause(ctx, mode); err != nil {
				t.Fatal(err)
			}
			st := e.Stats()
			if !st.Paused || st.Running+st.Waiting != 3 {
				t.Fatalf("paused stats %+v", st)
			}
			time.Sleep(5 * time.Millisecond)
			if s2 := e.Stats(); s2.Steps != st.Steps {
				t.Fatalf("stepped while paused: %d → %d", st.Steps, s2.Steps)
			}
			if err := e.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			<-done
			sameOutputs(t, mode, got, want)
			if mode == PauseRetract && got[0].Retractions+got[1].Retractions+got[2].Retractions != 3 {
				t.Fatalf("retract mode: retractions %d %d %d", got[0].Retractions, got[1].Retractions, got[2].Retractions)
			}
		})
	}
}

// TestPauseWaitAndAbort: pause "wait" returns once the requests in flight are done and holds new
// ones until resume; pause "abort" ends everything in flight with finish reason abort.
func TestPauseWaitAndAbort(t *testing.T) {
	w := tinyWeights(t, 5)
	e := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 256}, Config{})
	rs := testRequests()
	for i := range rs {
		rs[i].MaxNewTokens = 200
	}
	ctx := context.Background()
	done := make(chan []Result)
	if err := e.Pause(ctx, PauseInPlace); err != nil {
		t.Fatal(err)
	}
	go func() { done <- runAll(t, e, rs[:2]) }()
	waitFor(t, e, "2 in flight", func(s Stats) bool { return s.Waiting == 2 })
	if err := e.Pause(ctx, PauseWait); err != nil {
		t.Fatal(err)
	}
	first := <-done
	for _, r := range first {
		if r.Finish.Type != FinishLength {
			t.Fatalf("request in flight at pause(wait) ended %+v", r.Finish)
		}
	}
	late := make(chan []Result)
	go func() { late <- runAll(t, e, rs[2:3]) }()
	waitFor(t, e, "a queued request", func(s Stats) bool { return s.Waiting == 1 })
	time.Sleep(5 * time.Millisecond)
	if st := e.Stats(); st.Waiting != 1 || st.Running != 0 {
		t.Fatalf("a request submitted while paused should wait: %+v", st)
	}
	if err := e.Pause(ctx, PauseAbort); err != nil {
		t.Fatal(err)
	}
	if r := <-late; r[0].Finish.Type != FinishAbort {
		t.Fatalf("pause(abort) left %+v", r[0].Finish)
	}
	if err := e.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if r := runAll(t, e, rs[:1]); r[0].Finish.Type != FinishLength {
		t.Fatalf("after resume: %+v", r[0].Finish)
	}
}

// TestWeightSwapMidRequest: a weight update lands between steps; the request resumes on the new
// weights (recomputing its KV), its later tokens carry the new version, and its output differs
// from the run without the update.
func TestWeightSwapMidRequest(t *testing.T) {
	w0, w1 := tinyWeights(t, 5), tinyWeights(t, 6)
	r := testRequests()[0]
	r.MaxNewTokens = 300
	want := alone(t, w0, []Request{r})[0]
	e := startEngine(t, w0, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 256}, Config{})
	ctx := context.Background()
	res := make(chan []Result)
	go func() { res <- runAll(t, e, []Request{r}) }()
	waitSteps(t, e, 10)
	if err := e.Pause(ctx, PauseInPlace); err != nil {
		t.Fatal(err)
	}
	if err := e.SwapWeights(ctx, w1, "7", false); err != nil {
		t.Fatal(err)
	}
	if err := e.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	got := (<-res)[0]
	if len(got.Versions) != 2 || got.Versions[0].Version != "0" || got.Versions[1].Version != "7" ||
		got.Versions[0].Start != 0 || got.Versions[0].End != got.Versions[1].Start || got.Versions[1].End != len(got.OutputIDs) {
		t.Fatalf("version spans %+v over %d tokens", got.Versions, len(got.OutputIDs))
	}
	k := got.Versions[1].Start
	if !slices.Equal(got.OutputIDs[:k], want.OutputIDs[:k]) {
		t.Fatal("tokens before the update changed")
	}
	if slices.Equal(got.OutputIDs, want.OutputIDs) {
		t.Fatal("the weight update did not change the output")
	}
	if got.Version != "7" || got.Retractions != 1 {
		t.Fatalf("version %q retractions %d", got.Version, got.Retractions)
	}
	// A mismatched checkpoint is rejected and the served weights stay the new ones.
	bad := tinyWeights(t, 9)
	bad.Config.HiddenSize = 48
	if err := e.SwapWeights(ctx, bad, "8", false); err == nil {
		t.Fatal("mismatched weights accepted")
	}
	if st := e.Stats(); st.Version != "7" {
		t.Fatalf("version after a rejected swap %q", st.Version)
	}
}

// TestDisconnectFreesBlocks: a request whose client goes away is aborted and its blocks freed.
func TestDisconnectFreesBlocks(t *testing.T) {
	w := tinyWeights(t, 5)
	off := false
	e := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 256}, Config{PrefixCache: &off})
	r := testRequests()[0]
	r.MaxNewTokens = 400
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { _, err := e.Submit(ctx, r); errc <- err }()
	waitSteps(t, e, 5)
	if st := e.Stats(); st.UsedBlocks == 0 {
		t.Fatalf("no blocks in use while running: %+v", st)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if err := e.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.UsedBlocks != 0 || st.Running != 0 {
		t.Fatalf("after disconnect: %+v", st)
	}
}

// TestStops: stop token ids, EOS (unless ignored), max_new_tokens and bad requests.
func TestStops(t *testing.T) {
	w := tinyWeights(t, 5)
	e := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 64}, Config{ContextLength: 64})
	r := testRequests()[1] // greedy
	r.MaxNewTokens = 30
	ref := runAll(t, e, []Request{r})[0]
	stopAt := ref.OutputIDs[4]
	k := slices.Index(ref.OutputIDs, stopAt)
	r2 := r
	r2.StopTokenIDs = []int32{stopAt}
	got := runAll(t, e, []Request{r2})[0]
	if got.Finish.Type != FinishStop || got.Finish.MatchedToken != stopAt || !slices.Equal(got.OutputIDs, ref.OutputIDs[:k+1]) {
		t.Fatalf("stop token: %+v %v", got.Finish, got.OutputIDs)
	}
	r3 := r
	r3.IgnoreEOS = false
	e2 := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 64}, Config{EOSTokenIDs: []int32{stopAt}})
	if got := runAll(t, e2, []Request{r3})[0]; got.Finish.MatchedToken != stopAt {
		t.Fatalf("eos: %+v", got.Finish)
	}
	if got.Finish.Type != FinishStop {
		t.Fatal(got.Finish)
	}
	if ref.Finish.Type != FinishLength || ref.Finish.Length != 30 {
		t.Fatalf("length: %+v", ref.Finish)
	}
	zero := r
	zero.MaxNewTokens = 0
	if got := runAll(t, e, []Request{zero})[0]; len(got.OutputIDs) != 0 || got.Finish.Type != FinishLength {
		t.Fatalf("max_new_tokens 0: %+v", got)
	}
	for name, bad := range map[string]func(*Request){
		"empty":       func(r *Request) { r.Prompt = nil },
		"token":       func(r *Request) { r.Prompt = []int32{1, 64} },
		"negative":    func(r *Request) { r.Prompt = []int32{-1} },
		"context":     func(r *Request) { r.Prompt = make([]int32, 64) },
		"past-ctx":    func(r *Request) { r.MaxNewTokens = 60 },
		"temperature": func(r *Request) { r.Params.Temperature = -1 },
		"top_p":       func(r *Request) { r.Params.TopP = 0 },
		"stop-string": func(r *Request) { r.StopStrings = []string{"x"} },
	} {
		b := r
		bad(&b)
		var ie *InputError
		if _, err := e.Submit(context.Background(), b); !errors.As(err, &ie) {
			t.Errorf("%s: err %v, want an InputError", name, err)
		}
	}
}

// BenchmarkEngineStep measures the engine's overhead per step on the pure-Go backend: 64
// requests of short contexts on the tiny model, submitted together, scheduled with continuous
// batching, the prefix cache on. ns/step is the wall time per step; overhead-ns/step leaves out
// the time inside Decoder.Step (scheduling, block management, prefix-cache bookkeeping, result
// handling and the goroutine hand-offs of Submit).
func BenchmarkEngineStep(b *testing.B) {
	w := tinyWeights(b, 5)
	e := startEngine(b, w, gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 1024}, Config{})
	rs := make([]Request, 64)
	for i := range rs {
		rs[i] = Request{Prompt: []int32{1, 2, 3, int32(i % 60)}, Params: gpu.SampleParams{Temperature: 1, TopP: 1}, MaxNewTokens: 16, IgnoreEOS: true}
	}
	st0 := e.Stats()
	for b.Loop() {
		runAll(b, e, rs)
	}
	if err := e.Barrier(context.Background()); err != nil {
		b.Fatal(err)
	}
	st := e.Stats()
	steps := float64(st.Steps - st0.Steps)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/steps, "ns/step")
	b.ReportMetric(float64((b.Elapsed()-(st.DecoderTime-st0.DecoderTime)).Nanoseconds())/steps, "overhead-ns/step")
}

// TestSmallCacheChunkedPrefill: long prompts prefilled in small chunks through a cache that holds
// barely one request: preemptions happen and every request still gets its lone output.
func TestSmallCacheChunkedPrefill(t *testing.T) {
	w := tinyWeights(t, 5)
	var rs []Request
	for i := range 3 {
		p := make([]int32, 30)
		for j := range p {
			p[j] = int32((j*7 + i*13) % 64)
		}
		rs = append(rs, Request{Prompt: p, Params: gpu.SampleParams{TopP: 1}, MaxNewTokens: 6, IgnoreEOS: true, Seed: seedPtr(uint64(i))})
	}
	want := alone(t, w, rs)
	off := false
	e := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 10}, Config{MaxStepTokens: 12, PrefixCache: &off})
	done := make(chan []Result)
	go func() { done <- runBatched(t, e, rs) }()
	select {
	case got := <-done:
		sameOutputs(t, "small cache", got, want)
		if got[0].Retractions+got[1].Retractions+got[2].Retractions == 0 {
			t.Fatal("the cache never ran out: the test does not test")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("requests stuck: %+v", e.Stats())
	}
}

// TestPrefillCannotDeadlock: when every running request is mid-prefill and none can get a block
// (they hold the pool between them), the scheduler retracts the newest instead of stalling.
func TestPrefillCannotDeadlock(t *testing.T) {
	w := tinyWeights(t, 5)
	dec, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 10})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(dec, Config{MaxStepTokens: 64}, nil, nil, nil) // not run: the test drives schedule
	if err != nil {
		t.Fatal(err)
	}
	mk := func(arrival uint64, computed, blocks int) *seq {
		s := &seq{req: Request{Prompt: make([]int32, 30), MaxNewTokens: 4}, tokens: make([]int32, 30), arrival: arrival,
			computed: computed, done: make(chan Result, 1)}
		for range blocks {
			b, ok := e.pool.Alloc()
			if !ok {
				t.Fatal("pool empty")
			}
			s.blocks = append(s.blocks, b)
		}
		return s
	}
	old, young := mk(1, 16, 4), mk(2, 24, 6)
	e.running = []*seq{old, young}
	batch := e.schedule()
	// The young request was retracted (and, with the blocks left over, readmitted from scratch).
	if len(batch) == 0 || batch[0].s != old || batch[0].chunk != 14 || young.retracts != 1 {
		t.Fatalf("batch %+v, young retracted %d", batch, young.retracts)
	}
}

// paddedWeights scales the (tied) embedding rows ≥ limit by f, so that for f > 1 the padded
// ids take much of the probability mass, as with a policy trained onto Qwen3's padded rows.
func paddedWeights(t testing.TB, limit int, f float32) *gpu.Weights {
	t.Helper()
	w := tinyWeights(t, 5)
	h, emb := w.Config.HiddenSize, w.Tensors[gpu.NameEmbed]
	for i := limit * h; i < len(emb); i++ {
		emb[i] *= f
	}
	return w
}

// samplingRequests are testRequests without the greedy ones (a greedy request whose argmax is
// padded ends at once; TestPaddedGreedyAborts checks that).
func samplingRequests() []Request {
	var rs []Request
	for _, r := range testRequests() {
		if !r.Params.Greedy() {
			r.MaxNewTokens = 40
			r.Params.Temperature = 2 // the tiny random model is peaked; flatten it so draws vary
			rs = append(rs, r)
		}
	}
	return rs
}

// TestPaddedIDsNeverSampled: with the padded rows dominating, no id ≥ the limit is returned,
// the rejections are counted, and the outputs stay reproducible per seed — also batched, with
// the prefix cache and small blocks (a re-fed position then often sits in a cached block).
func TestPaddedIDsNeverSampled(t *testing.T) {
	const limit = 48
	w := paddedWeights(t, limit, 1.45)
	rs := samplingRequests()
	off, on := false, true
	var ref []Result
	for _, tc := range []struct {
		name string
		kv   gpu.KVCacheSpec
		cfg  Config
	}{
		{"alone", gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 64}, Config{PrefixCache: &off, MaxRunning: 1}},
		{"batched+prefix-cache", gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 256}, Config{PrefixCache: &on}},
	} {
		tc.cfg.SampleVocabLimit = limit
		e := startEngine(t, w, tc.kv, tc.cfg)
		got := runBatched(t, e, rs)
		n := 0
		for i, r := range got {
			if r.Finish.Type == FinishAbort {
				t.Fatalf("%s: request %d aborted: %+v", tc.name, i, r.Finish)
			}
			for j, id := range r.OutputIDs {
				if id < 0 || id >= limit {
					t.Fatalf("%s: request %d token %d = %d is outside [0, %d)", tc.name, i, j, id, limit)
				}
				if lp := r.LogProbs[j]; !(lp <= 0) {
					t.Fatalf("%s: request %d log-prob %d = %v", tc.name, i, j, lp)
				}
			}
			n += len(r.OutputIDs)
		}
		if err := e.Barrier(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := e.Stats()
		if st.Rejected < n/3 {
			t.Fatalf("%s: %d rejections for %d tokens: the padded rows do not dominate, the test checks nothing", tc.name, st.Rejected, n)
		}
		if st.Generated != n {
			t.Fatalf("%s: Generated = %d, want the %d returned tokens", tc.name, st.Generated, n)
		}
		t.Logf("%s: %d tokens, %d rejected draws", tc.name, n, st.Rejected)
		if ref == nil {
			ref = got
		} else {
			sameOutputs(t, tc.name, got, ref)
		}
	}
}

// TestPaddedGreedyAborts: a greedy request whose argmax is padded cannot be redrawn and ends
// with finish reason abort and a message saying why, instead of returning the id.
func TestPaddedGreedyAborts(t *testing.T) {
	const limit = 48
	e := startEngine(t, paddedWeights(t, limit, 50), gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 64}, Config{SampleVocabLimit: limit})
	r := testRequests()[1]
	r.MaxNewTokens = 40
	got := runAll(t, e, []Request{r})[0]
	if got.Finish.Type != FinishAbort || !strings.Contains(got.Finish.Message, "outside the vocabulary") {
		t.Fatalf("finish %+v, want an abort naming the vocabulary", got.Finish)
	}
	for _, id := range got.OutputIDs {
		if id >= limit {
			t.Fatalf("returned padded id %d", id)
		}
	}
}

// TestVocabLimitInactive: when the model does not sample ids ≥ the limit, the limit changes
// nothing: outputs are bit-identical to an engine without it and nothing is rejected.
func TestVocabLimitInactive(t *testing.T) {
	w := tinyWeights(t, 5)
	rs := testRequests()
	want := alone(t, w, rs)
	top := int32(0)
	for _, r := range want {
		top = max(top, slices.Max(r.OutputIDs))
	}
	limit := int(top) + 1
	if limit >= w.Config.VocabSize {
		t.Fatalf("outputs reach id %d; pick requests that leave the top ids unused", top)
	}
	on := true
	e := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 256}, Config{PrefixCache: &on, SampleVocabLimit: limit})
	sameOutputs(t, "limited", runBatched(t, e, rs), want)
	if err := e.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := e.Stats().Rejected; n != 0 {
		t.Fatalf("%d rejections below the limit %d", n, limit)
	}
}

func TestVocabLimitConfig(t *testing.T) {
	w := tinyWeights(t, 5)
	for _, tc := range []struct {
		limit int
		ok    bool
	}{{0, true}, {1, true}, {64, true}, {65, false}, {-1, false}} {
		dec, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 8})
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(dec, Config{SampleVocabLimit: tc.limit}, nil, nil, nil)
		if (err == nil) != tc.ok {
			t.Errorf("limit %d: err = %v, want ok=%v", tc.limit, err, tc.ok)
		}
	}
}

// TestVocabLimitDefaultsToTokenizer: with Qwen3's real tokenizer (151,669 ids) and a model of
// Qwen3's padded 151,936-row vocabulary, the default limit is the tokenizer's size, so the 267
// padded rows — the ids a from-scratch policy sampled in the first GPU run — are never returned.
func TestVocabLimitDefaultsToTokenizer(t *testing.T) {
	dir, err := tokenizer.LocateQwen3()
	if err != nil {
		t.Skipf("Qwen3 tokenizer not found: %v", err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const qwen3Vocab = 151936
	if tok.VocabSize() >= qwen3Vocab {
		t.Fatalf("tokenizer vocabulary %d is not smaller than the model's %d", tok.VocabSize(), qwen3Vocab)
	}
	cfg := gpu.TinyConfig()
	cfg.VocabSize = qwen3Vocab
	cfg.HiddenSize, cfg.IntermediateSize = 8, 16
	w, err := gpu.NewRandomWeightsWith(cfg, 1, gpu.InitOptions{Std: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tok  *tokenizer.Tokenizer
		want int
	}{{tok, tok.VocabSize()}, {nil, qwen3Vocab}} {
		dec, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: 16, NumBlocks: 4})
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(dec, Config{}, tc.tok, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if e.limit != tc.want {
			t.Errorf("tokenizer %v: default limit %d, want %d", tc.tok != nil, e.limit, tc.want)
		}
	}
	if tok.VocabSize() != 151669 {
		t.Errorf("Qwen3's tokenizer has %d ids, docs/SAMPLER.md says 151,669", tok.VocabSize())
	}
}

// TestHugeMaxNewTokensRejected: max_new_tokens near 2^63 used to overflow prompt + max_new_tokens
// past both the context and the pool checks (issue 27 item 5); it must be refused at once, naming
// the field, for every size the sum can wrap at.
func TestHugeMaxNewTokensRejected(t *testing.T) {
	w := tinyWeights(t, 5)
	// The pool (40 tokens) is smaller than the context (512): the case that blocked the queue.
	e := startEngine(t, w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 10}, Config{})
	for _, mnt := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt - 5, math.MaxInt / 2, 1 << 62, 513, 41} {
		r := Request{Prompt: []int32{1, 2, 3, 4, 5, 6}, Params: gpu.SampleParams{TopP: 1}, MaxNewTokens: mnt}
		_, err := e.Submit(context.Background(), r)
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(ie.Msg, "max_new_tokens") {
			t.Errorf("max_new_tokens %d: err %v, want an InputError naming max_new_tokens", mnt, err)
		}
	}
	// Nothing was queued: a normal request is served at once.
	ok := Request{Prompt: []int32{1, 2, 3}, Params: gpu.SampleParams{TopP: 1}, MaxNewTokens: 4, IgnoreEOS: true}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := e.Submit(ctx, ok); err != nil || len(res.OutputIDs) != 4 {
		t.Fatalf("a normal request after the rejected ones: %+v, %v", res, err)
	}
}

// TestUnfittableHeadDoesNotBlockQueue: a request at the head of the queue that can never get its
// blocks — nothing is running and nothing is evictable, yet its next chunk finds no block — is
// ended at once with finish reason abort instead of holding the head (and every request behind
// it) until its client goes away. validate keeps such requests out; this is the scheduler's
// guarantee should one get past it.
func TestUnfittableHeadDoesNotBlockQueue(t *testing.T) {
	w := tinyWeights(t, 5)
	dec, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 10})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(dec, Config{MaxStepTokens: 64}, nil, nil, nil) // not run: the test drives schedule
	if err != nil {
		t.Fatal(err)
	}
	// Every block is held by something outside the scheduler's reach (a leaked reference), so
	// the head can never be admitted.
	for {
		if _, ok := e.pool.Alloc(); !ok {
			break
		}
	}
	head := &seq{req: Request{Prompt: make([]int32, 8), MaxNewTokens: 4}, tokens: make([]int32, 8), arrival: 1, first: true, done: make(chan Result, 1)}
	e.waiting = []*seq{head}
	if batch := e.schedule(); len(batch) != 0 {
		t.Fatalf("batch %+v from an empty pool", batch)
	}
	select {
	case res := <-head.done:
		if res.Finish.Type != FinishAbort || !strings.Contains(res.Finish.Message, "KV") {
			t.Fatalf("finish %+v, want abort naming the KV cache", res.Finish)
		}
	default:
		t.Fatal("the unfittable head is still waiting: it blocks the queue")
	}
	if len(e.waiting) != 0 {
		t.Fatalf("waiting %d, want 0", len(e.waiting))
	}
}
