package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"testing"
	"unicode/utf8"

	"tau2rl/lib/inference/chattemplate"
)

func newServer(t testing.TB, script Script, opts ...Option) *Server {
	t.Helper()
	s, err := NewServer(tokenizertest.Qwen3(t), script, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func post(t *testing.T, url string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("status %d, body %q: %v", res.StatusCode, data, err)
	}
	return res.StatusCode, out
}

var lookup = Reply{Content: "Let me look that up.", Reasoning: "Need the user.", ToolCalls: []ToolCall{
	{Name: "get_user_details", Arguments: map[string]any{"user_id": "mia_li_3668"}}}}

func promptIDs(t *testing.T) ([]int32, string) {
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "get_user_details", "description": "d", "parameters": {"type": "object", "properties": {}}}}`)}
	text, err := chattemplate.Render([]chattemplate.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Hi, I'm Mia."}},
		chattemplate.Options{Tools: tools, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	return tokenizertest.Qwen3(t).Encode(text), text
}

func TestGenerateWireFormat(t *testing.T) {
	var seen *Call
	s := newServer(t, ScriptFunc(func(_ context.Context, c *Call) (Reply, error) { seen = c; return lookup, nil }), WithWeightVersion("3"))
	ids, text := promptIDs(t)
	status, out := post(t, s.URL+"/generate", map[string]any{"input_ids": ids, "return_logprob": true, "rid": "ep1",
		"sampling_params": map[string]any{"max_new_tokens": 500, "temperature": 0}})
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	if seen.PromptText != text || len(seen.Messages) != 2 || seen.LastMessage().Content != "Hi, I'm Mia." ||
		!slices.Equal(seen.ToolNames(), []string{"get_user_details"}) || seen.Temperature == nil || *seen.Temperature != 0 || seen.API != APIGenerate {
		t.Errorf("call seen by the script: %+v", seen)
	}
	tk := tokenizertest.Qwen3(t)
	want, _ := lookup.Text(false)
	wantIDs := append(tk.Encode(want), 151645)
	var got []int32
	for _, v := range out["output_ids"].([]any) {
		got = append(got, int32(v.(float64)))
	}
	if !slices.Equal(got, wantIDs) {
		t.Fatalf("output_ids %v, want %v", got, wantIDs)
	}
	meta := out["meta_info"].(map[string]any)
	fr := meta["finish_reason"].(map[string]any)
	if fr["type"] != "stop" || fr["matched"].(float64) != 151645 || meta["id"] != "ep1" || meta["weight_version"] != "3" {
		t.Errorf("meta_info %v", meta)
	}
	lps := meta["output_token_logprobs"].([]any)
	for i, e := range lps {
		tr := e.([]any)
		if float32(tr[0].(float64)) != Logprob(len(ids), i, wantIDs[i]) || int32(tr[1].(float64)) != wantIDs[i] || tr[2] != nil {
			t.Fatalf("output_token_logprobs[%d] = %v", i, tr)
		}
	}
	if txt := out["text"].(string); !strings.HasPrefix(txt, "<think>\nNeed the user.\n</think>\n\nLet me look that up.\n<tool_call>") || strings.Contains(txt, "<|im_end|>") {
		t.Errorf("text %q", txt)
	}
	// The reply round-trips through the parser.
	c := chattemplate.ParseCompletion(want)
	if !c.Valid() || c.Reasoning != "Need the user." || c.ToolCalls[0].Function.Name != "get_user_details" {
		t.Errorf("parsed reply %+v", c)
	}
	// Length limit.
	_, out = post(t, s.URL+"/generate", map[string]any{"input_ids": ids, "return_logprob": true, "sampling_params": map[string]any{"max_new_tokens": 3}})
	meta = out["meta_info"].(map[string]any)
	if fr := meta["finish_reason"].(map[string]any); fr["type"] != "length" || len(out["output_ids"].([]any)) != 3 {
		t.Errorf("length-limited: %v", out)
	}
}

func TestGenerateBadRequests(t *testing.T) {
	s := newServer(t, Constant(Reply{Content: "x"}))
	for name, body := range map[string]any{
		"empty":         map[string]any{"input_ids": []int{}},
		"out of vocab":  map[string]any{"input_ids": []int{1 << 30}},
		"batch":         map[string]any{"input_ids": [][]int{{1}, {2}}},
		"none":          map[string]any{"sampling_params": map[string]any{}},
		"negative max":  map[string]any{"input_ids": []int{1}, "sampling_params": map[string]any{"max_new_tokens": -1}},
		"not json":      "{",
		"stream":        map[string]any{"input_ids": []int{1}, "stream": true},
		"text and ids":  map[string]any{"input_ids": []int{1}, "text": "a"},
		"ids not array": map[string]any{"input_ids": "abc"},
	} {
		if status, _ := post(t, s.URL+"/generate", body); status != 400 {
			t.Errorf("%s: status %d, want 400", name, status)
		}
	}
	s2 := newServer(t, ScriptFunc(func(context.Context, *Call) (Reply, error) { return Reply{}, errors.New("boom") }))
	if status, _ := post(t, s2.URL+"/generate", map[string]any{"input_ids": []int{1}}); status != 500 {
		t.Errorf("script error: status %d, want 500", status)
	}
}

func TestCompletionsWireFormat(t *testing.T) {
	s := newServer(t, Constant(Reply{Content: "Hello!"}), WithModel("qwen3"))
	ids, _ := promptIDs(t)
	status, out := post(t, s.URL+"/v1/completions", map[string]any{"model": "qwen3", "prompt": ids, "max_tokens": 100,
		"temperature": 0, "logprobs": 0, "return_token_ids": true, "return_tokens_as_token_ids": true})
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	ch := out["choices"].([]any)[0].(map[string]any)
	tk := tokenizertest.Qwen3(t)
	want := append(tk.Encode("Hello!"), 151645)
	var got []int32
	for _, v := range ch["token_ids"].([]any) {
		got = append(got, int32(v.(float64)))
	}
	if !slices.Equal(got, want) || ch["text"] != "Hello!" || ch["finish_reason"] != "stop" || ch["stop_reason"] != nil {
		t.Fatalf("choice %v", ch)
	}
	lp := ch["logprobs"].(map[string]any)
	toks := lp["tokens"].([]any)
	if toks[len(toks)-1] != "token_id:151645" || len(lp["token_logprobs"].([]any)) != len(want) {
		t.Errorf("logprobs %v", lp)
	}
	if len(ch["prompt_token_ids"].([]any)) != len(ids) {
		t.Error("prompt_token_ids missing")
	}
	// Text prompt, default max_tokens 16.
	_, out = post(t, s.URL+"/v1/completions", map[string]any{"model": "qwen3", "prompt": "Say hi", "logprobs": nil})
	if ch := out["choices"].([]any)[0].(map[string]any); ch["text"] != "Hello!" || ch["logprobs"] != nil {
		t.Errorf("text prompt: %v", ch)
	}
	// vLLM's request checks: a served model name, and top_k -1 (disabled) or ≥ 1.
	for _, bad := range []struct {
		body   map[string]any
		status int
	}{
		{map[string]any{"prompt": "Say hi"}, 400},
		{map[string]any{"model": "other", "prompt": "Say hi"}, 404},
		{map[string]any{"model": "qwen3", "prompt": "Say hi", "top_k": 0}, 400},
	} {
		if status, out := post(t, s.URL+"/v1/completions", bad.body); status != bad.status {
			t.Errorf("%v: status %d (%v), want %d", bad.body, status, out, bad.status)
		}
	}
	if status, out := post(t, s.URL+"/v1/completions", map[string]any{"model": "qwen3", "prompt": "Say hi", "top_k": -1}); status != 200 {
		t.Errorf("top_k -1: status %d (%v)", status, out)
	}
}

// TestCompletionsTextOffset: text_offset is vLLM's, the cumulative code-point length of the
// reported token strings: the tokens' text (multi-byte runes count one each), or the
// "token_id:N" strings with return_tokens_as_token_ids.
func TestCompletionsTextOffset(t *testing.T) {
	s := newServer(t, Constant(Reply{Content: "Ça coûte 5 €, señor."}), WithModel("qwen3"))
	ids, _ := promptIDs(t)
	for _, asIDs := range []bool{false, true} {
		_, out := post(t, s.URL+"/v1/completions", map[string]any{"model": "qwen3", "prompt": ids, "max_tokens": 100,
			"logprobs": 0, "return_tokens_as_token_ids": asIDs})
		lp := out["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
		toks, offs := lp["tokens"].([]any), lp["text_offset"].([]any)
		nonASCII, off := false, 0
		for i, tk := range toks {
			if int(offs[i].(float64)) != off {
				t.Fatalf("return_tokens_as_token_ids=%v: text_offset[%d] = %v, want %d (tokens %q, offsets %v)", asIDs, i, offs[i], off, toks, offs)
			}
			off += utf8.RuneCountInString(tk.(string))
			nonASCII = nonASCII || len(tk.(string)) != utf8.RuneCountInString(tk.(string))
		}
		if !asIDs && !nonASCII {
			t.Fatalf("no multi-byte token in %q: the test checks nothing", toks)
		}
	}
}

func TestChatWireFormat(t *testing.T) {
	var seen *Call
	s := newServer(t, ScriptFunc(func(_ context.Context, c *Call) (Reply, error) { seen = c; return lookup, nil }))
	status, out := post(t, s.URL+"/v1/chat/completions", map[string]any{
		"model": "m", "temperature": 0, "logprobs": true, "top_logprobs": 2, "return_token_ids": true,
		"messages": []any{
			map[string]any{"role": "system", "content": "S"},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Hi"}}},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": "get_user_details", "arguments": `{"user_id": "x"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": "{}"},
		},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_user_details", "parameters": map[string]any{}}}},
	})
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	if seen.API != APIChat || len(seen.Messages) != 4 || seen.Messages[1].Content != "Hi" || seen.Messages[2].ToolCalls[0].Function.Name != "get_user_details" ||
		!strings.Contains(seen.PromptText, "<tool_response>\n{}\n</tool_response>") || *seen.Temperature != 0 {
		t.Errorf("call %+v", seen)
	}
	ch := out["choices"].([]any)[0].(map[string]any)
	msg := ch["message"].(map[string]any)
	calls := msg["tool_calls"].([]any)
	fn := calls[0].(map[string]any)["function"].(map[string]any)
	if ch["finish_reason"] != "tool_calls" || msg["content"] != "Let me look that up." || msg["reasoning_content"] != "Need the user." ||
		fn["name"] != "get_user_details" || fn["arguments"] != `{"user_id": "mia_li_3668"}` {
		t.Errorf("choice %v", ch)
	}
	content := ch["logprobs"].(map[string]any)["content"].([]any)
	first := content[0].(map[string]any)
	if len(first["top_logprobs"].([]any)) != 2 || first["token"] != "<think>" {
		t.Errorf("logprobs entry %v", first)
	}
	if _, ok := out["prompt_token_ids"]; !ok || ch["token_ids"] == nil {
		t.Error("return_token_ids fields missing")
	}
	for name, body := range map[string]any{
		"no messages": map[string]any{"messages": []any{}},
		"empty tools": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}, "tools": []any{}},
		"bad role":    map[string]any{"messages": []any{map[string]any{"role": "robot", "content": "x"}}},
		"image part":  map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url"}}}}},
	} {
		if status, _ := post(t, s.URL+"/v1/chat/completions", body); status != 400 {
			t.Errorf("%s: status %d, want 400", name, status)
		}
	}
}

func TestFaults(t *testing.T) {
	s := newServer(t, Constant(Reply{Content: "ok"}))
	body := map[string]any{"input_ids": []int{9707}}
	s.FailNext(1, 503)
	s.FailNext(1, 429)
	if status, _ := post(t, s.URL+"/generate", body); status != 503 {
		t.Errorf("first: %d", status)
	}
	b, _ := json.Marshal(body)
	res, err := http.Post(s.URL+"/generate", "application/json", bytes.NewReader(b))
	if err != nil || res.StatusCode != 429 || res.Header.Get("Retry-After") != "0" {
		t.Errorf("second: %v %v", res, err)
	}
	res.Body.Close()
	s.DropNext(1)
	if _, err := http.Post(s.URL+"/generate", "application/json", bytes.NewReader(b)); err == nil {
		t.Error("dropped connection: want a client error")
	}
	s.MalformNext(1)
	res, err = http.Post(s.URL+"/generate", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || json.Valid(data) {
		t.Errorf("malformed: %d %q", res.StatusCode, data)
	}
	if status, _ := post(t, s.URL+"/generate", body); status != 200 {
		t.Errorf("after faults: %d", status)
	}
	if n := s.Requests("/generate"); n != 5 {
		t.Errorf("Requests = %d, want 5", n)
	}
	s.SetHealthy(false)
	if res, _ := http.Get(s.URL + "/health"); res.StatusCode != 503 {
		t.Errorf("unhealthy: %d", res.StatusCode)
	}
	s.SetHealthy(true)
	if res, _ := http.Get(s.URL + "/health"); res.StatusCode != 200 {
		t.Errorf("healthy: %d", res.StatusCode)
	}
}

func TestReloadEndpoints(t *testing.T) {
	s := newServer(t, Constant(Reply{Content: "ok"}))
	if status, out := post(t, s.URL+"/update_weights_from_disk", map[string]any{"model_path": "/ckpt/5", "weight_version": "5"}); status != 200 || out["success"] != true {
		t.Fatalf("%d %v", status, out)
	}
	if s.WeightVersion() != "5" || s.ModelPath() != "/ckpt/5" {
		t.Errorf("version %q path %q", s.WeightVersion(), s.ModelPath())
	}
	if status, out := post(t, s.URL+"/update_weights_from_disk", map[string]any{}); status != 400 || out["success"] != false {
		t.Errorf("missing path: %d %v", status, out)
	}
	if status, _ := post(t, s.URL+"/update_weights", map[string]any{"update_info": map[string]any{"path": "/x"}}); status != 400 {
		t.Error("update_weights before start accepted")
	}
	for _, step := range []struct {
		path string
		body any
	}{{"/pause?mode=wait", nil}, {"/start_weight_update", nil}, {"/update_weights", map[string]any{"update_info": map[string]any{"path": "/ckpt/6"}}},
		{"/finish_weight_update", map[string]any{"weight_version": "6"}}, {"/resume", nil}} {
		if status, out := post(t, s.URL+step.path, step.body); status != 200 {
			t.Fatalf("%s: %d %v", step.path, status, out)
		}
	}
	if s.WeightVersion() != "6" || s.ModelPath() != "/ckpt/6" {
		t.Errorf("after vLLM sequence: version %q path %q", s.WeightVersion(), s.ModelPath())
	}
}

func TestSequenceScript(t *testing.T) {
	sc := Sequence(Reply{Content: "a"}, Reply{Content: "b"})
	for _, want := range []string{"a", "b"} {
		r, err := sc.Reply(context.Background(), &Call{})
		if err != nil || r.Content != want {
			t.Fatalf("%v %v", r, err)
		}
	}
	if _, err := sc.Reply(context.Background(), &Call{}); err == nil {
		t.Error("exhausted sequence: want error")
	}
	if _, err := (Reply{ToolCalls: []ToolCall{{Name: "f", Arguments: func() {}}}}).Text(false); err == nil {
		t.Error("unmarshalable arguments: want error")
	}
	if txt, _ := (Reply{Reasoning: "r", Content: "c"}).Text(true); txt != "c" {
		t.Errorf("thinking off: %q", txt)
	}
}

// FuzzHandlers feeds arbitrary bodies to the generation endpoints: the
// server must answer (any status), never crash.
func FuzzHandlers(f *testing.F) {
	f.Add("/generate", `{"input_ids": [9707], "sampling_params": {"max_new_tokens": 4}}`)
	f.Add("/v1/completions", `{"model": "scripted-qwen3", "prompt": [9707, 0], "logprobs": 1, "return_token_ids": true}`)
	f.Add("/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 3}`)
	f.Add("/update_weights_from_disk", `{"model_path": "/x"}`)
	f.Add("/update_weights", `{"update_info": {"path": "/x"}}`)
	tk := tokenizertest.Qwen3(f)
	s, err := NewServer(tk, Constant(lookup))
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	h := s.Handler()
	f.Fuzz(func(t *testing.T, path, body string) {
		u, err := url.ParseRequestURI(path)
		if err != nil || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \t\r\n") {
			return
		}
		req := httptest.NewRequest(http.MethodPost, "http://x"+u.RequestURI(), strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == 200 && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("200 with invalid JSON for %s %q", path, body)
		}
	})
}

// TestRefusesNonLoopback: the server's weight-update endpoints are unauthenticated, so it only
// listens on loopback (tau2-scripted-llm addr=0.0.0.0:30000 used to expose them).
func TestRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		if s, err := NewServer(tokenizertest.Qwen3(t), Constant(Reply{Content: "x"}), WithAddr(addr)); err == nil {
			s.Close()
			t.Errorf("%s: the server listened", addr)
		} else if !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: %v", addr, err)
		}
	}
}
