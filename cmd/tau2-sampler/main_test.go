package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"tau2rl/cmd/internal/cli"
	"tau2rl/cmd/internal/clitest"
	"tau2rl/gpu"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/tokenizer"
)

var initOpts = gpu.InitOptions{Std: 0.5, NormJitter: 0.2}

func checkpoint(t *testing.T, cfg gpu.Config, seed uint64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ckpt")
	if _, err := gpu.WriteRandomCheckpoint(dir, cfg, seed, initOpts, gpu.BF16); err != nil {
		t.Fatal(err)
	}
	return dir
}

// start runs the binary's main wiring on a loopback port until the test ends; it returns the
// base URL and a stop function that delivers the shutdown signal and waits for run's result.
func start(t *testing.T, args ...string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bound := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		cfg := DefaultConfig()
		var out bytes.Buffer
		errc <- cli.Execute(ctx, cli.App{Name: "tau2-sampler", Usage: usage},
			append([]string{"--metrics-addr", "off", "--log-level", "warn", "listen=127.0.0.1:0"}, args...), &cfg, &out,
			func(ctx context.Context, rt *cli.Runtime) error { return run(ctx, rt, &cfg, bound) })
	}()
	select {
	case addr := <-bound:
		stopped := false
		stop := func() error {
			if stopped {
				return nil
			}
			stopped = true
			cancel()
			return <-errc
		}
		t.Cleanup(func() { _ = stop() })
		return "http://" + addr, stop
	case err := <-errc:
		cancel()
		t.Fatalf("tau2-sampler did not start: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatal("tau2-sampler did not start in time")
	}
	return "", nil
}

func endpoint(t *testing.T, url string) *llm.Endpoint {
	t.Helper()
	ec := llm.DefaultEndpointConfig()
	ec.BaseURL = url
	ec.MaxRetries = 0
	ep, err := llm.NewEndpoint(ec, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestProducerClients: the project's own SGLang and vLLM clients and both reloaders, unchanged,
// against a real tau2-sampler on loopback.
func TestProducerClients(t *testing.T) {
	v0, v1 := checkpoint(t, gpu.TinyConfig(), 5), checkpoint(t, gpu.TinyConfig(), 6)
	url, stop := start(t, "model="+v0, "tokenizer=none", "kv.block_size=4", "kv.blocks=128")
	ctx := context.Background()
	ep := endpoint(t, url)
	sg, vl := llm.NewSGLang(ep), llm.NewVLLM(ep, "")
	seed := int64(9)
	req := llm.GenerateRequest{InputIDs: []int32{1, 4, 9, 16, 25, 36}, MaxNewTokens: 10, Temperature: 1, Seed: &seed, RequestID: "ep-1"}
	a, err := sg.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.OutputIDs) == 0 || len(a.Logprobs) != len(a.OutputIDs) || a.WeightVersion != "0" || a.PromptTokens != 6 ||
		len(a.VersionSpans) != 1 || a.VersionSpans[0].End != len(a.OutputIDs) {
		t.Fatalf("sglang result %+v", a)
	}
	for _, lp := range a.Logprobs {
		if !(lp <= 0) || math.IsInf(float64(lp), 0) {
			t.Fatalf("log-prob %v", lp)
		}
	}
	b, err := vl.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.OutputIDs, b.OutputIDs) || !slices.Equal(a.Logprobs, b.Logprobs) || a.FinishReason != b.FinishReason {
		t.Fatalf("vLLM %+v differs from SGLang %+v for the same seed", b, a)
	}

	// SGLang reload to v1, then vLLM's dev-mode reload back to v0's weights as version 2.
	if err := llm.NewSGLangReloader(ep, llm.SGLangReloadOptions{}).LoadWeights(ctx, v1, 1); err != nil {
		t.Fatal(err)
	}
	c, err := sg.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if c.WeightVersion != "1" || slices.Equal(c.OutputIDs, a.OutputIDs) && slices.Equal(c.Logprobs, a.Logprobs) {
		t.Fatalf("after reload to v1: %+v", c)
	}
	if err := llm.NewVLLMReloader(ep).LoadWeights(ctx, v0, 2); err != nil {
		t.Fatal(err)
	}
	d, err := vl.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.OutputIDs, a.OutputIDs) || !slices.Equal(d.Logprobs, a.Logprobs) {
		t.Fatalf("v0's weights again should give v0's output: %+v vs %+v", d, a)
	}
	if e, _ := sg.Generate(ctx, req); e.WeightVersion != "2" {
		t.Fatalf("version after the vLLM reload: %q", e.WeightVersion)
	}
	// A checkpoint that does not exist is rejected (a 4xx, not retried) and v2 keeps serving.
	err = llm.NewSGLangReloader(ep, llm.SGLangReloadOptions{}).LoadWeights(ctx, filepath.Join(t.TempDir(), "missing"), 3)
	if !errors.Is(err, llm.ErrRejected) {
		t.Fatalf("missing checkpoint: %v", err)
	}
	if e, _ := sg.Generate(ctx, req); e.WeightVersion != "2" || !slices.Equal(e.OutputIDs, a.OutputIDs) {
		t.Fatalf("after a rejected reload: %+v", e)
	}
	// A bad request is a rejection the producer does not retry.
	bad := req
	bad.InputIDs = []int32{1, 64}
	if _, err := sg.Generate(ctx, bad); !errors.Is(err, llm.ErrRejected) || !strings.Contains(err.Error(), "vocabulary") {
		t.Fatalf("out-of-vocabulary prompt: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// TestChatCompletions: OpenAI chat with tools through the project's go-openai client, on a tiny
// model with Qwen3's real vocabulary.
func TestChatCompletions(t *testing.T) {
	tokDir, err := tokenizer.LocateQwen3() // not tokenizertest: the server loads it, once is enough
	if errors.Is(err, tokenizer.ErrNotFound) {
		t.Skipf("Qwen3 tokenizer not found: %v", err)
	}
	cfg := gpu.TinyConfig()
	cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID, cfg.MaxPositionEmbeddings = 151936, 151643, 151645, 4096
	dir := checkpoint(t, cfg, 5)
	url, _ := start(t, "model="+dir, "served_model_name=tiny-qwen3", "tokenizer="+tokDir)
	ep := endpoint(t, url+"/v1")
	chat := llm.NewChatOn(ep, "tiny-qwen3")
	def := openai.FunctionDefinition{Name: "get_user", Description: "Look a user up.",
		Parameters: json.RawMessage(`{"type": "object", "properties": {"id": {"type": "string"}}}`)}
	temp := float32(0.7)
	res, err := chat.Complete(context.Background(), llm.ChatRequest{
		ChatCompletionRequest: openai.ChatCompletionRequest{
			Messages: []openai.ChatCompletionMessage{
				{Role: "system", Content: "You are a helpful agent."},
				{Role: "user", Content: "Find user u1."},
			},
			Tools:               []openai.Tool{{Type: openai.ToolTypeFunction, Function: &def}},
			MaxCompletionTokens: 8, LogProbs: true, Seed: ptr(3),
		},
		Temperature: &temp,
		Extra:       map[string]any{"return_token_ids": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := res.Choices[0]
	if ch.Message.Role != "assistant" || ch.LogProbs == nil || len(ch.LogProbs.Content) != res.Usage.CompletionTokens ||
		res.Usage.PromptTokens < 50 || res.Model != "tiny-qwen3" {
		t.Fatalf("chat response %+v", res)
	}
	if ch.FinishReason != openai.FinishReasonLength && ch.FinishReason != openai.FinishReasonStop && ch.FinishReason != openai.FinishReasonToolCalls {
		t.Fatalf("finish %q", ch.FinishReason)
	}
	if !bytes.Contains(res.Raw, []byte(`"token_ids"`)) {
		t.Fatalf("no token_ids in %s", res.Raw)
	}
}

func ptr[T any](v T) *T { return &v }

// TestConfigErrors: configuration errors are usage errors (exit status 2) with a clear message.
func TestConfigErrors(t *testing.T) {
	dir := checkpoint(t, gpu.TinyConfig(), 5)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "model"},
		{[]string{"model=" + dir, "backend=tpu"}, "backend"},
		{[]string{"model=" + dir, "kv.block_size=3"}, "power of two"},
		{[]string{"model=" + dir, "kv.memory_fraction=1.5"}, "memory_fraction"},
		{[]string{"model=" + dir, "nonsense=1"}, "nonsense"},
	} {
		cfg := DefaultConfig()
		var out bytes.Buffer
		err := cli.Execute(context.Background(), cli.App{Name: "tau2-sampler", Usage: usage}, append([]string{"--metrics-addr", "off"}, tc.args...), &cfg, &out,
			func(ctx context.Context, rt *cli.Runtime) error { return run(ctx, rt, &cfg, nil) })
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a usage error mentioning %q", tc.args, err, tc.want)
		}
	}
	// Without the cuda tag, backend=cuda says how to get it, as a usage error (exit status 2)
	// before the weights load, as tau2-trainer's does.
	cfg := DefaultConfig()
	var out bytes.Buffer
	err := cli.Execute(context.Background(), cli.App{Name: "tau2-sampler", Usage: usage}, []string{"--metrics-addr", "off", "--log-level", "error", "model=" + dir, "backend=cuda", "listen=127.0.0.1:0", "tokenizer=none"}, &cfg, &out,
		func(ctx context.Context, rt *cli.Runtime) error { return run(ctx, rt, &cfg, nil) })
	if err == nil || !strings.Contains(err.Error(), "gpu-sampler") || cli.ExitCode(err) != 2 {
		t.Fatalf("backend=cuda: %v (exit %d), want a usage error naming the build that has it", err, cli.ExitCode(err))
	}
	// --print-config shows the defaults (a configuration is validated before it is printed, so
	// the one required key is given).
	cfg = DefaultConfig()
	out.Reset()
	if err := cli.Execute(context.Background(), cli.App{Name: "tau2-sampler", Usage: usage}, []string{"--print-config", "model=" + dir}, &cfg, &out, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "block_size: 16") || !strings.Contains(out.String(), "listen: 127.0.0.1:30000") {
		t.Fatalf("print-config:\n%s", out.String())
	}
}

// TestDrainOnSignal: the shutdown signal lets a request in flight finish within drain_timeout,
// or aborts it after, and run returns cleanly.
func TestDrainOnSignal(t *testing.T) {
	dir := checkpoint(t, gpu.TinyConfig(), 5)
	url, stop := start(t, "model="+dir, "tokenizer=none", "drain_timeout=50ms", "kv.blocks=64", "engine.eos_token_ids=[]")
	sg := llm.NewSGLang(endpoint(t, url))
	type out struct {
		res llm.GenerateResult
		err error
	}
	got := make(chan out, 1)
	go func() {
		r, err := sg.Generate(context.Background(), llm.GenerateRequest{InputIDs: []int32{1, 2}, MaxNewTokens: 500, Temperature: 1})
		got <- out{r, err}
	}()
	time.Sleep(20 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatalf("run after the signal: %v", err)
	}
	o := <-got
	if o.err == nil && o.res.FinishReason != llm.FinishAbort && o.res.FinishReason != llm.FinishLength {
		t.Fatalf("in-flight request: %+v", o.res)
	}
}

// TestConfigFiles: testdata/config/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	clitest.ConfigFiles(t, "testdata/config", func() any { c := DefaultConfig(); return &c })
}

// modelInfoVersion reads /get_model_info's weight_version.
func modelInfoVersion(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/get_model_info")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	v, _ := m["weight_version"].(string)
	return v
}

// TestWeightVersionFromCheckpoint: a sampler started on a trainer checkpoint reports that
// checkpoint's version (issue 27 item 20: v2 reported "0"): trainer_state.json's version, else the
// v<N> directory name; engine.weight_version overrides; a plain model directory reports "0".
func TestWeightVersionFromCheckpoint(t *testing.T) {
	root := t.TempDir()
	write := func(name, state string) string {
		dir := filepath.Join(root, name)
		if _, err := gpu.WriteRandomCheckpoint(dir, gpu.TinyConfig(), 5, initOpts, gpu.BF16); err != nil {
			t.Fatal(err)
		}
		if state != "" {
			if err := os.WriteFile(filepath.Join(dir, "trainer_state.json"), []byte(state), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, c := range []struct {
		name, dir string
		extra     []string
		want      string
	}{
		{"state file", write("v2", `{"format": 2, "version": 2, "step": 2}`), nil, "2"},
		{"state file wins over the name", write("renamed-copy", `{"format": 2, "version": 7}`), nil, "7"},
		{"directory name", write("v3", ""), nil, "3"},
		{"config overrides", write("v4", `{"version": 4}`), []string{"engine.weight_version=base"}, "base"},
		{"plain model directory", write("Qwen3-tiny", ""), nil, "0"},
		{"unreadable state file, name", write("v9", `{not json`), nil, "9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url, stop := start(t, append([]string{"model=" + c.dir, "tokenizer=none", "kv.blocks=64"}, c.extra...)...)
			if got := modelInfoVersion(t, url); got != c.want {
				t.Errorf("weight_version %q, want %q", got, c.want)
			}
			_ = stop()
		})
	}
}

// TestDrainAnswers503: after the shutdown signal, while a request is still in flight, new
// requests and /health get 503 with Retry-After on the still-open listener (not a refused
// connection, which clients read as a dead host); the request in flight is aborted at
// drain_timeout and run returns.
func TestDrainAnswers503(t *testing.T) {
	dir := checkpoint(t, gpu.TinyConfig(), 5)
	url, stop := start(t, "model="+dir, "tokenizer=none", "drain_timeout=1500ms", "kv.blocks=64")
	post := func(path, body string) (*http.Response, error) {
		return http.Post(url+path, "application/json", strings.NewReader(body))
	}
	// Hold the engine so that a request stays in flight through the drain.
	if resp, err := post("/pause_generation", `{"mode": "in_place"}`); err != nil || resp.StatusCode != 200 {
		t.Fatalf("pause: %v %v", resp, err)
	}
	inflight := make(chan int, 1)
	go func() {
		resp, err := post("/generate", `{"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 4}}`)
		if err != nil {
			inflight <- -1
			return
		}
		resp.Body.Close()
		inflight <- resp.StatusCode
	}()
	time.Sleep(100 * time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	deadline := time.Now().Add(time.Second)
	for {
		resp, err := http.Get(url + "/health")
		if err != nil {
			t.Fatalf("/health while draining: %v (the listener closed before the requests in flight finished)", err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("/health 503 without Retry-After")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/health never turned 503 after the signal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := post("/generate", `{"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 4}}`)
	if err != nil {
		t.Fatalf("a new request while draining: %v, want a 503", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a new request while draining: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if err := <-stopped; err != nil {
		t.Fatalf("run: %v", err)
	}
	if code := <-inflight; code != 200 {
		t.Fatalf("the in-flight request: status %d, want 200 (finish reason abort)", code)
	}
}
