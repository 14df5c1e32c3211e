package httpapi

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
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/gpu/sampler"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
)

var initOpts = gpu.InitOptions{Std: 0.5, NormJitter: 0.2}

type fixture struct {
	eng *sampler.Engine
	srv *httptest.Server
	dir string // the checkpoint served
}

// newFixture serves cfg's random checkpoint (seed 5) on loopback, with tok (may be nil).
func newFixture(t testing.TB, cfg gpu.Config, tok *tokenizer.Tokenizer, ecfg sampler.Config) *fixture {
	t.Helper()
	return newFixtureEdited(t, cfg, tok, ecfg, nil)
}

// newFixtureEdited serves the checkpoint with edit (if any) applied to the served weights.
func newFixtureEdited(t testing.TB, cfg gpu.Config, tok *tokenizer.Tokenizer, ecfg sampler.Config, edit func(*gpu.Weights)) *fixture {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "v0")
	w, err := gpu.WriteRandomCheckpoint(dir, cfg, 5, initOpts, gpu.F32)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(w)
	}
	dec, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := sampler.New(dec, ecfg, tok, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = eng.Run(context.Background()) }()
	srv := httptest.NewServer(New(eng, Options{ModelName: "tiny", ModelPath: dir}).Handler())
	t.Cleanup(func() { srv.Close(); eng.Close(); <-eng.Done() })
	return &fixture{eng: eng, srv: srv, dir: dir}
}

func (f *fixture) post(t testing.TB, path, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(f.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s: status %d, body %q is not a JSON object", path, resp.StatusCode, data)
	}
	return resp.StatusCode, out
}

func ints(v any) []int32 {
	var out []int32
	for _, x := range v.([]any) {
		out = append(out, int32(x.(float64)))
	}
	return out
}

func TestGenerateWire(t *testing.T) {
	tok := tokenizertest.Qwen3(t)
	f := newFixture(t, gpu.TinyConfig(), tok, sampler.Config{})
	body := `{"input_ids": [1, 5, 9, 13, 17, 21], "rid": "ep1-t0", "return_logprob": true,
		"sampling_params": {"max_new_tokens": 12, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0, "sampling_seed": 42, "ignore_eos": true}}`
	status, out := f.post(t, "/generate", body)
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	ids := ints(out["output_ids"])
	meta := out["meta_info"].(map[string]any)
	lps := meta["output_token_logprobs"].([]any)
	if len(ids) != 12 || len(lps) != 12 || meta["id"] != "ep1-t0" || meta["weight_version"] != "0" ||
		meta["prompt_tokens"].(float64) != 6 || meta["completion_tokens"].(float64) != 12 {
		t.Fatalf("response %v", out)
	}
	for i, tr := range lps {
		tr := tr.([]any)
		if lp := tr[0].(float64); !(lp <= 0) || int32(tr[1].(float64)) != ids[i] || tr[2] != nil {
			t.Fatalf("logprob triple %d: %v", i, tr)
		}
	}
	fr := meta["finish_reason"].(map[string]any)
	if fr["type"] != "length" || fr["length"].(float64) != 12 {
		t.Fatalf("finish %v", fr)
	}
	if _, ok := out["text"].(string); !ok {
		t.Fatalf("no text with a tokenizer: %v", out)
	}
	vs := meta["weight_versions"].([]any)
	if len(vs) != 1 || vs[0].(map[string]any)["end"].(float64) != 12 {
		t.Fatalf("weight_versions %v", vs)
	}
	// The same seed gives the same tokens; vLLM's endpoint agrees with SGLang's.
	_, again := f.post(t, "/generate", body)
	if !slices.Equal(ints(again["output_ids"]), ids) {
		t.Fatal("same seed, different output")
	}
	status, v := f.post(t, "/v1/completions", `{"model": "tiny", "prompt": [1, 5, 9, 13, 17, 21], "max_tokens": 12, "temperature": 1,
		"seed": 42, "ignore_eos": true, "logprobs": 0, "return_token_ids": true, "return_tokens_as_token_ids": true}`)
	if status != 200 {
		t.Fatalf("completions %d %v", status, v)
	}
	ch := v["choices"].([]any)[0].(map[string]any)
	if !slices.Equal(ints(ch["token_ids"]), ids) || ch["finish_reason"] != "length" {
		t.Fatalf("vLLM choice %v, SGLang ids %v", ch, ids)
	}
	toks := ch["logprobs"].(map[string]any)["tokens"].([]any)
	if toks[0] != "token_id:"+itoa(ids[0]) {
		t.Fatalf("tokens %v", toks)
	}
	// A cached repeat reports its prefix-cache hit.
	_, rep := f.post(t, "/generate", `{"input_ids": [1, 5, 9, 13, 17, 21], "sampling_params": {"max_new_tokens": 1}}`)
	if rep["meta_info"].(map[string]any)["cached_tokens"].(float64) != 4 {
		t.Fatalf("cached tokens %v", rep["meta_info"])
	}
}

func itoa(v int32) string { b, _ := json.Marshal(v); return string(b) }

// TestStopString: generation stops when the detokenized output contains a stop string, which
// SGLang trims from text and reports as matched.
func TestStopString(t *testing.T) {
	tok := tokenizertest.Qwen3(t)
	f := newFixture(t, gpu.TinyConfig(), tok, sampler.Config{})
	_, ref := f.post(t, "/generate", `{"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 20, "temperature": 0, "ignore_eos": true}}`)
	ids := ints(ref["output_ids"])
	text := ref["text"].(string)
	if len(text) < 6 {
		t.Fatalf("text %q too short", text)
	}
	stop := text[3:5]
	body, _ := json.Marshal(map[string]any{"input_ids": []int{1, 2, 3}, "sampling_params": map[string]any{
		"max_new_tokens": 20, "temperature": 0, "ignore_eos": true, "stop": stop}})
	_, got := f.post(t, "/generate", string(body))
	fr := got["meta_info"].(map[string]any)["finish_reason"].(map[string]any)
	gotIDs := ints(got["output_ids"])
	if fr["type"] != "stop" || fr["matched"] != stop || !slices.Equal(gotIDs, ids[:len(gotIDs)]) || len(gotIDs) >= len(ids) {
		t.Fatalf("stop %q: finish %v ids %v (ref %v)", stop, fr, gotIDs, ids)
	}
	if want := text[:strings.Index(text, stop)]; got["text"] != want {
		t.Fatalf("text %q, want %q", got["text"], want)
	}
}

// TestBadInput: each malformed request gets a 4xx naming the problem, and the server keeps
// serving.
func TestBadInput(t *testing.T) {
	f := newFixture(t, gpu.TinyConfig(), nil, sampler.Config{ContextLength: 64})
	long := strings.Repeat("1,", 63) + "1"
	for _, tc := range []struct{ path, body, want string }{
		{"/generate", `{"input_ids": [1, 2`, "malformed JSON"},
		{"/generate", `{}`, "input_ids is required"},
		{"/generate", `{"input_ids": []}`, "cannot be empty"},
		{"/generate", `{"input_ids": [[1, 2], [3]]}`, "batch"},
		{"/generate", `{"input_ids": ["a"]}`, "list of integer token ids"},
		{"/generate", `{"input_ids": [1, 64]}`, "outside the vocabulary"},
		{"/generate", `{"input_ids": [1, -3]}`, "outside the vocabulary"},
		{"/generate", `{"input_ids": [99999999999]}`, "outside the vocabulary"},
		{"/generate", `{"input_ids": [` + long + `]}`, "context length is 64"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"max_new_tokens": 64}}`, "exceeds the context length"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"max_new_tokens": -1}}`, "max_new_tokens"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"temperature": -0.5}}`, "temperature"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"top_p": 0}}`, "top_p"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"top_p": 1.5}}`, "top_p"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"min_p": 2}}`, "min_p"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"top_k": -2}}`, "top_k"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"n": 2}}`, "sampling_params.n must be 1"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"stop": "x"}}`, "tokenizer"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"stop": 5}}`, "stop must be"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"stop_token_ids": [-1]}}`, "stop_token_ids"},
		{"/generate", `{"input_ids": [1], "stream": true}`, "stream"},
		{"/generate", `{"text": "hello"}`, "text prompts"},
		{"/v1/completions", `{"prompt": "hello"}`, "text prompts"},
		{"/v1/completions", `{"prompt": [1, 2], "logprobs": 5}`, "logprobs=5"},
		{"/v1/completions", `{"prompt": [1, 2], "max_tokens": 63}`, "exceeds the context length"},
		{"/v1/completions", `{"prompt": [1, 2], "max_tokens": 9223372036854775807}`, "max_tokens 9223372036854775807 is too large"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"max_new_tokens": 9223372036854775807}}`, "max_new_tokens 9223372036854775807 is too large"},
		{"/generate", `{"input_ids": [1], "sampling_params": {"max_new_tokens": 9223372036854775800}}`, "max_new_tokens"},
		{"/v1/completions", `{"prompt": [1, 2], "temperature": -1}`, "temperature"},
		{"/v1/completions", `[1, 2]`, "malformed JSON"},
		{"/v1/completions", `{"prompt": [1, 2], "stream": true}`, "stream is not supported"},
		{"/v1/completions", `{"prompt": [1, 2], "n": 3}`, "n must be 1"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`, "tokenizer"},
		{"/update_weights_from_disk", `{"model_path": ""}`, "empty checkpoint path"},
		{"/update_weights_from_disk", `{"model_path": "/nonexistent"}`, "old weights keep serving"},
		{"/update_weights_from_disk", `{"model_path": "x", "load_format": "dummy"}`, "load_format"},
		{"/pause_generation", `{"mode": "sideways"}`, "mode"},
		{"/abort_request", `{}`, "rid or abort_all"},
		{"/update_weights", `{"update_info": {"path": "x"}}`, "start_weight_update"},
		{"/finish_weight_update", `{}`, "no weight update"},
	} {
		status, out := f.post(t, tc.path, tc.body)
		msg, _ := json.Marshal(out)
		if status < 400 || status >= 500 || !strings.Contains(string(msg), tc.want) {
			t.Errorf("%s %s: status %d %s, want 4xx mentioning %q", tc.path, tc.body, status, msg, tc.want)
		}
	}
	if status, out := f.post(t, "/generate", `{"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3}}`); status != 200 {
		t.Fatalf("after bad input: %d %v", status, out)
	}
	if st := f.eng.Stats(); st.Running+st.Waiting != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestReloadFromDisk: a reload changes the outputs and the version; a malformed or mismatched
// checkpoint is rejected with a clear message and the served weights do not change.
func TestReloadFromDisk(t *testing.T) {
	f := newFixture(t, gpu.TinyConfig(), nil, sampler.Config{})
	gen := func() ([]int32, string) {
		_, out := f.post(t, "/generate", `{"input_ids": [3, 1, 4, 1, 5], "sampling_params": {"max_new_tokens": 16, "temperature": 0, "ignore_eos": true}}`)
		return ints(out["output_ids"]), out["meta_info"].(map[string]any)["weight_version"].(string)
	}
	a, v := gen()
	if v != "0" {
		t.Fatalf("version %q", v)
	}
	dir1 := filepath.Join(t.TempDir(), "v1")
	if _, err := gpu.WriteRandomCheckpoint(dir1, gpu.TinyConfig(), 6, initOpts, gpu.BF16); err != nil {
		t.Fatal(err)
	}
	status, out := f.post(t, "/update_weights_from_disk", `{"model_path": "`+dir1+`", "weight_version": "1"}`)
	if status != 200 || out["success"] != true {
		t.Fatalf("reload: %d %v", status, out)
	}
	b, v := gen()
	if v != "1" || slices.Equal(a, b) {
		t.Fatalf("after reload: version %q, output changed %v", v, !slices.Equal(a, b))
	}
	// Broken checkpoints.
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	if _, err := gpu.WriteRandomCheckpoint(corrupt, gpu.TinyConfig(), 7, initOpts, gpu.F32); err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(corrupt, "model.safetensors")
	data, _ := os.ReadFile(st)
	if err := os.WriteFile(st, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	wide := gpu.TinyConfig()
	wide.HiddenSize = 48
	mismatched := filepath.Join(t.TempDir(), "wide")
	if _, err := gpu.WriteRandomCheckpoint(mismatched, wide, 7, initOpts, gpu.F32); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{corrupt: "safetensors", mismatched: "hidden_size"} {
		status, out := f.post(t, "/update_weights_from_disk", `{"model_path": "`+dir+`", "weight_version": "2"}`)
		if status != 400 || out["success"] != false || !strings.Contains(out["message"].(string), want) {
			t.Fatalf("%s: %d %v, want a 400 mentioning %q", dir, status, out, want)
		}
	}
	c, v := gen()
	if v != "1" || !slices.Equal(b, c) {
		t.Fatalf("after rejected reloads: version %q, output %v, want %v", v, c, b)
	}
	_, info := func() (int, map[string]any) {
		resp, err := http.Get(f.srv.URL + "/get_model_info")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}()
	if info["weight_version"] != "1" || info["model_path"] != dir1 {
		t.Fatalf("model info %v", info)
	}
}

// TestDisconnectFreesBlocks: a client that goes away mid-generation gets its request aborted and
// its KV blocks freed.
func TestDisconnectFreesBlocks(t *testing.T) {
	off := false
	f := newFixture(t, gpu.TinyConfig(), nil, sampler.Config{PrefixCache: &off})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/generate",
		strings.NewReader(`{"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 500, "ignore_eos": true}}`))
	done := make(chan error)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for f.eng.Stats().UsedBlocks == 0 {
		if time.Now().After(deadline) {
			t.Fatal("request never started")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	for {
		if err := f.eng.Barrier(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := f.eng.Stats()
		if st.UsedBlocks == 0 && st.Running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("blocks not freed after disconnect: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestChatMessage: the completion parser's result becomes OpenAI's message shape.
func TestChatMessage(t *testing.T) {
	msg, finish := chatMessage(`<think>
plan
</think>

Let me look.
<tool_call>
{"name": "get_user", "arguments": {"id": "u1"}}
</tool_call>`, true, "r1", sampler.FinishStop)
	calls := msg.ToolCalls
	if finish != "tool_calls" || msg.ReasoningContent == nil || *msg.ReasoningContent != "plan" || msg.Content == nil ||
		*msg.Content != "Let me look." || len(calls) != 1 || calls[0].Function.Arguments != `{"id": "u1"}` || calls[0].ID != "call_r1_0" {
		t.Fatalf("message %+v finish %s", msg, finish)
	}
	msg, finish = chatMessage(`<tool_call>{"name": broken</tool_call>`, true, "r2", sampler.FinishStop)
	if finish != "stop" || msg.ToolCalls != nil || msg.Content == nil || !strings.Contains(*msg.Content, "broken") {
		t.Fatalf("malformed call: %+v %s", msg, finish)
	}
	msg, _ = chatMessage("plain answer", false, "r3", sampler.FinishLength)
	if msg.Content == nil || *msg.Content != "plain answer" {
		t.Fatalf("plain: %+v", msg)
	}
}

// FuzzGenerateRequest: whatever the body, /generate answers 200 or a 4xx, never a 5xx or a crash.
func FuzzGenerateRequest(f *testing.F) {
	fx := newFixture(f, gpu.TinyConfig(), nil, sampler.Config{ContextLength: 64})
	for _, s := range []string{
		`{"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 4, "temperature": 0.5, "top_k": 3}}`,
		`{"input_ids": [[1], [2]]}`, `{"input_ids": [1], "sampling_params": {"top_p": 1e309}}`,
		`{"input_ids": [1], "sampling_params": {"max_new_tokens": null, "stop_token_ids": [2]}}`, `null`, `{"input_ids": {}}`,
	} {
		f.Add([]byte(s))
	}
	h := New(fx.eng, Options{}).Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/generate", "/v1/completions"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
			if rec.Code != 200 && (rec.Code < 400 || rec.Code >= 500) {
				t.Fatalf("%s %q: status %d %s", path, body, rec.Code, rec.Body)
			}
		}
	})
}

// TestGenerateNeverReturnsPaddedIDs: with the embedding rows ≥ engine.sample_vocab_limit scaled
// up so that the padded ids take much of the mass (as with a policy trained onto Qwen3's padded
// LM-head rows), /generate never returns such an id, and a seed still fixes the output.
func TestGenerateNeverReturnsPaddedIDs(t *testing.T) {
	const limit = 48
	f := newFixtureEdited(t, gpu.TinyConfig(), nil, sampler.Config{SampleVocabLimit: limit}, func(w *gpu.Weights) {
		h, emb := w.Config.HiddenSize, w.Tensors[gpu.NameEmbed]
		for i := limit * h; i < len(emb); i++ {
			emb[i] *= 1.45
		}
	})
	n := 0
	for seed := range 6 {
		body := `{"input_ids": [1, 5, 9, 13, 17, 21], "return_logprob": true, "sampling_params": {"max_new_tokens": 30,
			"temperature": 2.0, "sampling_seed": ` + itoa(int32(seed)) + `, "ignore_eos": true}}`
		status, out := f.post(t, "/generate", body)
		if status != 200 {
			t.Fatalf("status %d: %v", status, out)
		}
		ids := ints(out["output_ids"])
		for _, id := range ids {
			if id >= limit {
				t.Fatalf("seed %d: padded id %d returned: %v", seed, id, ids)
			}
		}
		n += len(ids)
		if _, again := f.post(t, "/generate", body); !slices.Equal(ints(again["output_ids"]), ids) {
			t.Fatalf("seed %d: same seed, different output", seed)
		}
	}
	if err := f.eng.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := f.eng.Stats(); st.Rejected < n/3 {
		t.Fatalf("%d rejections for %d tokens: the padded rows do not dominate", st.Rejected, n)
	}
}

// TestVLLMFailedUpdateKeepsVersion: a vLLM weight-update session whose /update_weights failed
// must not relabel the served weights at /finish_weight_update (issue 27 item 20): the old
// weights keep serving under their old version, and the finish answers 400 saying why.
func TestVLLMFailedUpdateKeepsVersion(t *testing.T) {
	f := newFixture(t, gpu.TinyConfig(), nil, sampler.Config{})
	if status, out := f.post(t, "/start_weight_update", `{}`); status != 200 {
		t.Fatalf("start: %d %v", status, out)
	}
	if status, out := f.post(t, "/update_weights", `{"update_info": {"path": "/nonexistent/v7"}}`); status != 400 {
		t.Fatalf("update from a missing checkpoint: %d %v", status, out)
	}
	status, out := f.post(t, "/finish_weight_update", `{"weight_version": "7"}`)
	if status != 400 || !strings.Contains(out["error"].(string), "update_weights failed") {
		t.Fatalf("finish after a failed update: %d %v, want a 400 naming the failure", status, out)
	}
	if v := f.eng.Stats().Version; v != "0" {
		t.Fatalf("version %q after a failed update, want the old \"0\"", v)
	}
	// The session is over; a new one with a good checkpoint still works.
	dir := filepath.Join(t.TempDir(), "v8")
	if _, err := gpu.WriteRandomCheckpoint(dir, gpu.TinyConfig(), 8, initOpts, gpu.BF16); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, body string }{{"/start_weight_update", `{}`},
		{"/update_weights", `{"update_info": {"path": "` + dir + `"}}`}, {"/finish_weight_update", `{"weight_version": "8"}`}} {
		if status, out := f.post(t, c.path, c.body); status != 200 {
			t.Fatalf("%s: %d %v", c.path, status, out)
		}
	}
	if v := f.eng.Stats().Version; v != "8" {
		t.Fatalf("version %q after a good update, want 8", v)
	}
}

// TestDrainingAnswers503: while draining, generation and /health answer 503 with Retry-After
// (clients such as the producers' retry them elsewhere), and InFlight counts generation requests.
func TestDrainingAnswers503(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v0")
	w, err := gpu.WriteRandomCheckpoint(dir, gpu.TinyConfig(), 5, initOpts, gpu.F32)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 256})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := sampler.New(dec, sampler.Config{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = eng.Run(context.Background()) }()
	api := New(eng, Options{ModelName: "tiny", ModelPath: dir})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(func() { srv.Close(); eng.Close(); <-eng.Done() })
	api.SetDraining(true)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/generate", `{"input_ids": [1, 2]}`}, {"POST", "/v1/completions", `{"prompt": [1, 2]}`},
		{"POST", "/v1/chat/completions", `{"messages": []}`}, {"GET", "/health", ""}, {"GET", "/health_generate", ""},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s while draining: %d, Retry-After %q; want 503 with Retry-After", c.path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if n := api.InFlight(); n != 0 {
		t.Fatalf("in flight %d after the refused requests", n)
	}
}
