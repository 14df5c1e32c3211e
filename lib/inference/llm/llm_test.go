package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	openai "github.com/sashabaranov/go-openai"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llmtest"
)

func server(t testing.TB, script llmtest.Script, opts ...llmtest.Option) *llmtest.Server {
	t.Helper()
	s, err := llmtest.NewServer(tokenizertest.Qwen3(t), script, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fastEndpoint has millisecond backoff so retry tests run quickly.
func fastEndpoint(t testing.TB, url string, m *Metrics, mod ...func(*EndpointConfig)) *Endpoint {
	t.Helper()
	cfg := DefaultEndpointConfig()
	cfg.BaseURL, cfg.Name = url, "test"
	cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	for _, f := range mod {
		f(&cfg)
	}
	ep, err := NewEndpoint(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

var toolReply = llmtest.Reply{Reasoning: "Look up the user.", ToolCalls: []llmtest.ToolCall{
	{Name: "get_user_details", Arguments: map[string]any{"user_id": "mia_li_3668"}}}}

func prompt(t testing.TB) []int32 {
	text, err := chattemplate.Render([]chattemplate.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Hi"}},
		chattemplate.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	return tokenizertest.Qwen3(t).Encode(text)
}

// recorder is a script that remembers the temperature each call carried.
type recorder struct {
	mu    sync.Mutex
	temps []*float64
	reply llmtest.Reply
}

func (r *recorder) Reply(_ context.Context, c *llmtest.Call) (llmtest.Reply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.temps = append(r.temps, c.Temperature)
	return r.reply, nil
}

func TestPolicies(t *testing.T) {
	tk := tokenizertest.Qwen3(t)
	rec := &recorder{reply: toolReply}
	s := server(t, rec, llmtest.WithWeightVersion("4"))
	ids := prompt(t)
	text, _ := toolReply.Text(false)
	want := append(tk.Encode(text), 151645)
	for _, p := range []struct {
		name    string
		policy  Policy
		version string
	}{
		{"sglang", NewSGLang(fastEndpoint(t, s.URL, nil)), "4"},
		{"vllm", NewVLLM(fastEndpoint(t, s.URL, nil), "scripted-qwen3"), ""},
	} {
		t.Run(p.name, func(t *testing.T) {
			res, err := p.policy.Generate(context.Background(), GenerateRequest{InputIDs: ids, MaxNewTokens: 512, Temperature: 0, RequestID: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.OutputIDs, want) || res.FinishReason != FinishStop || res.MatchedStop != 151645 || res.WeightVersion != p.version {
				t.Fatalf("result %+v", res)
			}
			for i, id := range res.OutputIDs {
				if res.Logprobs[i] != llmtest.Logprob(len(ids), i, id) {
					t.Fatalf("logprob %d = %v", i, res.Logprobs[i])
				}
			}
			if p.version != "" && (len(res.VersionSpans) != 1 || res.VersionSpans[0] != (VersionSpan{"4", 0, len(want)})) {
				t.Errorf("version spans %v", res.VersionSpans)
			}
			rec.mu.Lock()
			last := rec.temps[len(rec.temps)-1]
			rec.mu.Unlock()
			if last == nil || *last != 0 {
				t.Errorf("temperature 0 not sent: %v", last)
			}
			res, err = p.policy.Generate(context.Background(), GenerateRequest{InputIDs: ids, MaxNewTokens: 5, Temperature: 1})
			if err != nil || res.FinishReason != FinishLength || len(res.OutputIDs) != 5 || res.MatchedStop != -1 {
				t.Fatalf("length: %+v %v", res, err)
			}
			// The completion parses into the reply and extends the history.
			h, _ := chattemplate.New(chattemplate.ModeIncremental, tk, []chattemplate.Message{{Role: "user", Content: "Hi"}}, chattemplate.Options{})
			c, err := h.AddCompletion(want)
			if err != nil || !c.Valid() || c.ToolCalls[0].Function.Name != "get_user_details" || c.Reasoning != "Look up the user." {
				t.Errorf("parse: %+v %v", c, err)
			}
		})
	}
	for _, bad := range []GenerateRequest{{}, {InputIDs: ids}, {InputIDs: ids, MaxNewTokens: 1, TopP: 2}, {InputIDs: []int32{-1}, MaxNewTokens: 1}} {
		if _, err := NewSGLang(fastEndpoint(t, s.URL, nil)).Generate(context.Background(), bad); !errors.Is(err, ErrRejected) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestRetriesAndErrors(t *testing.T) {
	s := server(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ep := fastEndpoint(t, s.URL, m, func(c *EndpointConfig) { c.RequestTimeout = 300 * time.Millisecond })
	p := NewSGLang(ep)
	req := GenerateRequest{InputIDs: prompt(t), MaxNewTokens: 16}
	ctx := context.Background()

	count := func() int { return s.Requests("/generate") }
	n0 := count()
	s.FailNext(2, 500)
	s.FailNext(1, 429)
	s.DropNext(1)
	if _, err := p.Generate(ctx, req); err == nil {
		t.Fatal("4 faults with 3 retries: want an error")
	} else if !errors.Is(err, ErrUnavailable) || !IsInfrastructure(err) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	} else {
		var le *Error
		if !errors.As(err, &le) || le.Attempts != 4 {
			t.Errorf("error %#v", err)
		}
	}
	if got := count() - n0; got != 4 {
		t.Errorf("attempts %d, want 4", got)
	}

	s.FailNext(1, 503)
	s.DelayNext(1, time.Second) // longer than RequestTimeout: a timeout, retried
	s.DropNext(1)
	if res, err := p.Generate(ctx, req); err != nil || res.FinishReason != FinishStop {
		t.Fatalf("3 faults then success: %v", err)
	}

	s.FailNext(1, 400)
	n0 = count()
	if _, err := p.Generate(ctx, req); !errors.Is(err, ErrRejected) || IsInfrastructure(err) {
		t.Fatalf("400: %v", err)
	}
	if got := count() - n0; got != 1 {
		t.Errorf("400 was retried: %d attempts", got)
	}

	s.MalformNext(1)
	if _, err := p.Generate(ctx, req); !errors.Is(err, ErrBadResponse) || IsInfrastructure(err) {
		t.Fatalf("malformed: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	s.DelayNext(1, time.Second)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := p.Generate(cctx, req); !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) || !IsInfrastructure(err) {
		t.Fatalf("cancelled: %v", err)
	}

	if got := testutil.ToFloat64(m.requests.WithLabelValues("test", "generate", OutcomeUnavailable)); got != 1 {
		t.Errorf("unavailable count %v", got)
	}
	if got := testutil.ToFloat64(m.retries.WithLabelValues("test", "generate", "status_5xx")); got != 3 {
		t.Errorf("5xx retries %v", got)
	}
	if got := testutil.ToFloat64(m.retries.WithLabelValues("test", "generate", "timeout")); got != 1 {
		t.Errorf("timeout retries %v", got)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("test", "generate", OutcomeOK)); got != 1 {
		t.Errorf("ok count %v", got)
	}
	if got := testutil.ToFloat64(m.tokens.WithLabelValues("test", "out")); got == 0 {
		t.Error("no output tokens counted")
	}
	if _, err := NewMetrics(reg); err != nil {
		t.Errorf("second NewMetrics on one registry: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	ep := fastEndpoint(t, "http://127.0.0.1:1", nil, func(c *EndpointConfig) { c.BackoffBase, c.BackoffMax = 100*time.Millisecond, time.Second })
	for attempt := range 8 {
		window := min(100*time.Millisecond<<attempt, time.Second)
		for range 50 {
			if d := ep.backoff(attempt, nil); d < 0 || d > window {
				t.Fatalf("attempt %d: backoff %v outside [0, %v]", attempt, d, window)
			}
		}
	}
	h := http.Header{}
	h.Set("Retry-After", "3")
	if d := ep.backoff(0, &response{header: h}); d != time.Second {
		t.Errorf("Retry-After 3s capped at 1s: got %v", d)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	var cur, peak atomic.Int32
	s := server(t, llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		n := cur.Add(1)
		defer cur.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(30 * time.Millisecond)
		return llmtest.Reply{Content: "ok"}, nil
	}))
	p := NewSGLang(fastEndpoint(t, s.URL, nil, func(c *EndpointConfig) { c.MaxConcurrency = 2 }))
	req := GenerateRequest{InputIDs: prompt(t), MaxNewTokens: 8}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.Generate(context.Background(), req)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if peak.Load() != 2 {
		t.Errorf("peak concurrency %d, want 2", peak.Load())
	}
	// Waiting for a slot respects the context.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	full := NewSGLang(fastEndpoint(t, s.URL, nil, func(c *EndpointConfig) { c.MaxConcurrency = 1 }))
	full.ep.sem <- struct{}{}
	if _, err := full.Generate(ctx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slot wait: %v", err)
	}
}

func TestChat(t *testing.T) {
	var mu sync.Mutex
	var calls []*llmtest.Call
	s := server(t, llmtest.ScriptFunc(func(_ context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
		return toolReply, nil
	}))
	cfg := DefaultChatConfig()
	cfg.Endpoint.BaseURL, cfg.Endpoint.APIKey, cfg.Model = s.URL+"/v1", "secret", "user-sim"
	c, err := NewChat(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	zero := float32(0)
	res, err := c.Complete(context.Background(), ChatRequest{
		ChatCompletionRequest: openai.ChatCompletionRequest{
			Messages: []openai.ChatCompletionMessage{{Role: "system", Content: "S"}, {Role: "user", Content: "Hi"}},
			Tools: []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: "get_user_details",
				Parameters: json.RawMessage(`{"type": "object", "properties": {"user_id": {"type": "string"}}}`)}}},
			LogProbs: true, TopLogProbs: 2, MaxCompletionTokens: 256,
		},
		Temperature: &zero,
		Extra:       map[string]any{"top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": false}, "return_token_ids": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	ch := res.Choices[0]
	if ch.FinishReason != openai.FinishReasonToolCalls || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Arguments != `{"user_id": "mia_li_3668"}` {
		t.Errorf("choice %+v", ch)
	}
	if ch.LogProbs == nil || len(ch.LogProbs.Content) == 0 || len(ch.LogProbs.Content[0].TopLogProbs) != 2 {
		t.Errorf("logprobs %+v", ch.LogProbs)
	}
	wire, err := res.Wire()
	if err != nil || len(wire.PromptTokenIDs) != res.Usage.PromptTokens || len(wire.Choices[0].TokenIDs) != res.Usage.CompletionTokens {
		t.Errorf("server fields: prompt_token_ids %d, token_ids %v, usage %+v: %v", len(wire.PromptTokenIDs), wire.Choices, res.Usage, err)
	}
	call := calls[0]
	var body map[string]any
	json.Unmarshal(call.Body, &body)
	if call.Temperature == nil || *call.Temperature != 0 || body["top_k"].(float64) != 20 || body["model"] != "user-sim" ||
		call.Header.Get("Authorization") != "Bearer secret" || !call.ThinkingOff {
		t.Errorf("request body %v, headers %v", body, call.Header)
	}
	// Thinking off: the reply's reasoning is not rendered.
	if ch.Message.ReasoningContent != "" {
		t.Errorf("reasoning with thinking off: %q", ch.Message.ReasoningContent)
	}

	// go-openai alone drops temperature 0: the gap this client closes.
	oc := openai.DefaultConfig("x")
	oc.BaseURL = s.URL + "/v1"
	if _, err := openai.NewClientWithConfig(oc).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "m", Temperature: 0, Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Hi"}}}); err != nil {
		t.Fatal(err)
	}
	if calls[len(calls)-1].Temperature != nil {
		t.Error("plain go-openai sent temperature 0; the workaround may no longer be needed")
	}

	s.FailNext(1, 502)
	if _, err := c.Complete(context.Background(), ChatRequest{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Hi"}}}}); err != nil {
		t.Errorf("502 then success: %v", err)
	}
	s.MalformNext(1)
	if _, err := c.Complete(context.Background(), ChatRequest{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Hi"}}}}); !errors.Is(err, ErrBadResponse) {
		t.Errorf("malformed: %v", err)
	}
	s.FailNext(1, 404)
	if _, err := c.Complete(context.Background(), ChatRequest{ChatCompletionRequest: openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Hi"}}}}); !errors.Is(err, ErrRejected) {
		t.Errorf("404: %v", err)
	}
}

func TestReloaders(t *testing.T) {
	s := server(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	ctx := context.Background()
	ep := fastEndpoint(t, s.URL, nil)
	if err := NewSGLangReloader(ep, SGLangReloadOptions{}).LoadWeights(ctx, "/ckpt/7", 7); err != nil {
		t.Fatal(err)
	}
	res, err := NewSGLang(ep).Generate(ctx, GenerateRequest{InputIDs: prompt(t), MaxNewTokens: 4})
	if err != nil || res.WeightVersion != "7" || s.ModelPath() != "/ckpt/7" {
		t.Fatalf("after reload: %+v %v", res, err)
	}
	if err := NewSGLangReloader(ep, SGLangReloadOptions{}).LoadWeights(ctx, "", 8); !errors.Is(err, ErrRejected) {
		t.Errorf("empty path: %v", err)
	}
	if err := NewVLLMReloader(ep).LoadWeights(ctx, "/ckpt/9", 9); err != nil {
		t.Fatal(err)
	}
	if s.WeightVersion() != "9" || s.ModelPath() != "/ckpt/9" {
		t.Errorf("vLLM reload: %q %q", s.WeightVersion(), s.ModelPath())
	}
	var nop NopReloader
	multi := MultiReloader{&nop, NewSGLangReloader(ep, SGLangReloadOptions{})}
	if err := multi.LoadWeights(ctx, "/ckpt/10", 10); err != nil {
		t.Fatal(err)
	}
	if loads := nop.Loads(); len(loads) != 1 || loads[0] != (WeightLoad{"/ckpt/10", 10}) {
		t.Errorf("nop loads %v", loads)
	}
}

func TestVLLMReloadResumesOnFailure(t *testing.T) {
	var paths []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/update_weights" {
			http.Error(w, `{"error": "no disk backend"}`, http.StatusBadRequest)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	err := NewVLLMReloader(fastEndpoint(t, srv.URL, nil)).LoadWeights(context.Background(), "/x", 1)
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("want ErrRejected, got %v", err)
	}
	if want := []string{"/pause", "/start_weight_update", "/update_weights", "/resume"}; !slices.Equal(paths, want) {
		t.Errorf("calls %v, want %v", paths, want)
	}
}

func TestNewPolicyAndBalanced(t *testing.T) {
	a := server(t, llmtest.Constant(llmtest.Reply{Content: "a"}))
	b := server(t, llmtest.Constant(llmtest.Reply{Content: "b"}))
	cfg := DefaultPolicyConfig()
	cfg.Endpoints = []EndpointConfig{{BaseURL: a.URL}, {BaseURL: b.URL}}
	p, r, err := NewPolicy(cfg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := p.Generate(context.Background(), GenerateRequest{InputIDs: prompt(t), MaxNewTokens: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if a.Requests("/generate") != 3 || b.Requests("/generate") != 3 {
		t.Errorf("balance: %d / %d", a.Requests("/generate"), b.Requests("/generate"))
	}
	if err := r.LoadWeights(context.Background(), "/ckpt/2", 2); err != nil || a.WeightVersion() != "2" || b.WeightVersion() != "2" {
		t.Errorf("multi reload: %v", err)
	}
	cfg.Backend, cfg.Model = BackendVLLM, "scripted-qwen3"
	if p, _, err := NewPolicy(cfg, nil); err != nil {
		t.Fatal(err)
	} else if res, err := p.Generate(context.Background(), GenerateRequest{InputIDs: prompt(t), MaxNewTokens: 4}); err != nil || len(res.OutputIDs) == 0 {
		t.Fatalf("vllm via NewPolicy: %v", err)
	}
	for _, bad := range []PolicyConfig{{Backend: "tgi", Endpoints: cfg.Endpoints}, {Backend: BackendSGLang}, {Endpoints: []EndpointConfig{{BaseURL: "ftp://x"}}}} {
		if _, _, err := NewPolicy(bad, nil); err == nil {
			t.Errorf("%+v: want error", bad)
		}
	}
}

func TestDecodeRejectsInconsistent(t *testing.T) {
	for name, body := range map[string]string{
		"batch":          `[{"output_ids": []}]`,
		"no finish":      `{"output_ids": [1], "meta_info": {"output_token_logprobs": [[-0.1, 1, null]]}}`,
		"count mismatch": `{"output_ids": [1, 2], "meta_info": {"finish_reason": {"type": "length"}, "output_token_logprobs": [[-0.1, 1, null]]}}`,
		"id mismatch":    `{"output_ids": [1], "meta_info": {"finish_reason": {"type": "length"}, "output_token_logprobs": [[-0.1, 2, null]]}}`,
		"null logprob":   `{"output_ids": [1], "meta_info": {"finish_reason": {"type": "length"}, "output_token_logprobs": [[null, 1, null]]}}`,
		"bad span":       `{"output_ids": [1], "meta_info": {"finish_reason": {"type": "length"}, "output_token_logprobs": [[-0.1, 1, null]], "weight_versions": [{"version": "1", "start": 0, "end": 5}]}}`,
		"unknown finish": `{"output_ids": [], "meta_info": {"finish_reason": {"type": "exploded"}, "output_token_logprobs": []}}`,
	} {
		if _, err := decodeSGLang([]byte(body)); err == nil {
			t.Errorf("sglang %s: want error", name)
		}
	}
	for name, body := range map[string]string{
		"no choices":   `{"choices": []}`,
		"no logprobs":  `{"choices": [{"token_ids": [1], "finish_reason": "stop"}]}`,
		"mismatch":     `{"choices": [{"token_ids": [1, 2], "logprobs": {"token_logprobs": [-1]}, "finish_reason": "stop"}]}`,
		"bad token":    `{"choices": [{"logprobs": {"tokens": ["hello"], "token_logprobs": [-1]}, "finish_reason": "stop"}]}`,
		"null finish":  `{"choices": [{"token_ids": [1], "logprobs": {"token_logprobs": [-1]}, "finish_reason": null}]}`,
		"null logprob": `{"choices": [{"token_ids": [1], "logprobs": {"token_logprobs": [null]}, "finish_reason": "length"}]}`,
	} {
		if _, err := decodeVLLM([]byte(body)); err == nil {
			t.Errorf("vllm %s: want error", name)
		}
	}
	// Ids recovered from "token_id:N" strings; a numeric stop_reason is the matched id.
	res, err := decodeVLLM([]byte(`{"choices": [{"logprobs": {"tokens": ["token_id:5", "token_id:7"], "token_logprobs": [-1, -2]}, "finish_reason": "stop", "stop_reason": 7}]}`))
	if err != nil || !slices.Equal(res.OutputIDs, []int32{5, 7}) || res.MatchedStop != 7 {
		t.Errorf("token_id strings: %+v %v", res, err)
	}
	res, err = decodeSGLang([]byte(`{"output_ids": [3, 4], "meta_info": {"finish_reason": {"type": "abort", "message": "x"}, "output_token_logprobs": [[-0.1, 3, null], [-0.2, 4, "t"]], "weight_versions": [{"version": "1", "start": 0, "end": 1}, {"version": "2", "start": 1, "end": 2}], "weight_version": "2"}}`))
	if err != nil || res.FinishReason != FinishAbort || len(res.VersionSpans) != 2 || res.VersionSpans[1].Version != "2" {
		t.Errorf("abort with spans: %+v %v", res, err)
	}
}

func FuzzDecodeSGLang(f *testing.F) {
	f.Add(`{"output_ids": [1], "meta_info": {"finish_reason": {"type": "stop", "matched": 1}, "output_token_logprobs": [[-0.1, 1, null]]}}`)
	f.Add(`{"output_ids": [], "meta_info": {"finish_reason": {"type": "length", "length": 0}, "output_token_logprobs": []}}`)
	f.Fuzz(func(t *testing.T, body string) {
		res, err := decodeSGLang([]byte(body))
		if err == nil && (len(res.Logprobs) != len(res.OutputIDs) || res.FinishReason == "") {
			t.Fatalf("inconsistent result %+v for %q", res, body)
		}
	})
}

func FuzzDecodeVLLM(f *testing.F) {
	f.Add(`{"choices": [{"token_ids": [1], "logprobs": {"token_logprobs": [-1]}, "finish_reason": "stop"}]}`)
	f.Add(`{"choices": [{"logprobs": {"tokens": ["token_id:5"], "token_logprobs": [-1]}, "finish_reason": "length"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		res, err := decodeVLLM([]byte(body))
		if err == nil && (len(res.Logprobs) != len(res.OutputIDs) || res.FinishReason == "") {
			t.Fatalf("inconsistent result %+v for %q", res, body)
		}
	})
}

func TestMergeJSON(t *testing.T) {
	out, err := mergeJSON([]byte(`{"a": 1, "temperature": 0.5}`), map[string]any{"temperature": 0, "top_k": 20})
	if err != nil || !strings.Contains(string(out), `"temperature":0`) || !strings.Contains(string(out), `"top_k":20`) || !strings.Contains(string(out), `"a":1`) {
		t.Errorf("merge: %s %v", out, err)
	}
	if _, err := mergeJSON([]byte(`[1]`), map[string]any{"x": 1}); err == nil {
		t.Error("array body: want error")
	}
}

// BenchmarkSGLangGenerate measures client overhead per call against the
// scripted server on loopback (the server's own work included).
func BenchmarkSGLangGenerate(b *testing.B) {
	s := server(b, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	p := NewSGLang(fastEndpoint(b, s.URL, nil))
	req := GenerateRequest{InputIDs: prompt(b), MaxNewTokens: 16}
	for b.Loop() {
		if _, err := p.Generate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChatComplete(b *testing.B) {
	s := server(b, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	cfg := DefaultChatConfig()
	cfg.Endpoint.BaseURL = s.URL + "/v1"
	c, err := NewChat(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	req := ChatRequest{ChatCompletionRequest: openai.ChatCompletionRequest{Model: "m",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Hi"}}}}
	for b.Loop() {
		if _, err := c.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestErrorRedactsReflectedKey: a server that quotes the Authorization header in its error body
// must not put the API key into the error text (stored as info.error and logged).
func TestErrorRedactsReflectedKey(t *testing.T) {
	const key = "sk-test-0123456789abcdefghijklmnop"
	s := server(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	for _, status := range []int{401, 500} {
		s.ReflectAuthNext(1, status)
		ep := fastEndpoint(t, s.URL, nil, func(c *EndpointConfig) { c.APIKey, c.MaxRetries = key, 0 })
		_, err := NewSGLang(ep).Generate(context.Background(), GenerateRequest{InputIDs: prompt(t), MaxNewTokens: 4})
		if err == nil {
			t.Fatalf("HTTP %d: no error", status)
		}
		var le *Error
		if !errors.As(err, &le) {
			t.Fatalf("HTTP %d: %T %v", status, err, err)
		}
		if strings.Contains(err.Error(), "0123456789abcdef") || strings.Contains(le.Body, "0123456789abcdef") {
			t.Errorf("HTTP %d: the key leaked into the error: %v", status, err)
		}
		if !strings.Contains(err.Error(), "invalid credentials") || !strings.Contains(err.Error(), "[REDACTED]") {
			t.Errorf("HTTP %d: error lost its diagnostics: %v", status, err)
		}
	}
}

func TestTokenVersions(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  GenerateResult
		cur  int64
		want []int64
	}{
		{"no version", GenerateResult{OutputIDs: []int32{1, 2}}, 7, []int64{7, 7}},
		{"weight version", GenerateResult{OutputIDs: []int32{1, 2}, WeightVersion: "3"}, 7, []int64{3, 3}},
		{"spans", GenerateResult{OutputIDs: []int32{1, 2, 3}, WeightVersion: "5", VersionSpans: []VersionSpan{{"4", 0, 2}, {"x", 2, 3}}}, 7, []int64{4, 4, 7}},
		{"bad weight version", GenerateResult{OutputIDs: []int32{1}, WeightVersion: "v2"}, 1, []int64{1}},
	} {
		if got := TokenVersions(tc.res, tc.cur); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
