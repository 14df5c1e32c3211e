package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/producers/proxy"
)

// bookTool is a function tool for the tests below.
var bookTool = map[string]any{"type": "function", "function": map[string]any{"name": "book",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{}}}}

// A client that parses the model's tool-call arguments and sends them back
// re-serialized (Python's json.dumps of json.loads, a JS object's
// JSON.stringify: 1.0 → 1, "caf\u00e9" → "café", other key order and
// spacing) continues the session: no drift, and the next prompt holds the
// model's own bytes.
func TestReserializedToolArgumentsContinue(t *testing.T) {
	const generated = `{"city": "caf\u00e9", "amount": 1.0, "limit": 1e2, "tags": ["a", {"z": 0.50, "y": -0}], "big": 12345678901234567890}`
	for _, tc := range []struct{ name, sent string }{
		{"as generated", generated},
		{"compact", `{"city":"caf\u00e9","amount":1.0,"limit":1e2,"tags":["a",{"z":0.50,"y":-0}],"big":12345678901234567890}`},
		{"python json.dumps(json.loads(…), ensure_ascii=False)", `{"city": "café", "amount": 1.0, "limit": 100.0, "tags": ["a", {"z": 0.5, "y": 0}], "big": 12345678901234567890}`},
		{"sorted keys, no spaces, exponents", `{"amount":1,"big":1.234567890123456789E19,"city":"caf\u00E9","limit":100,"tags":["a",{"y":0,"z":5e-1}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
				if c.LastMessage().Role == chattemplate.RoleTool {
					return llmtest.Reply{Content: "Booked."}, nil
				}
				return llmtest.Reply{Raw: "<tool_call>\n{\"name\": \"book\", \"arguments\": " + generated + "}\n</tool_call>"}, nil
			})
			h := newHarness(t, script)
			msgs := []any{map[string]any{"role": "user", "content": "Book it."}}
			code, out := h.chat(t, "args", map[string]any{"messages": msgs, "tools": []any{bookTool}})
			msg, _ := firstChoice(t, out)
			tcs, _ := msg["tool_calls"].([]any)
			if code != 200 || len(tcs) != 1 {
				t.Fatalf("%d: %v", code, out)
			}
			call := tcs[0].(map[string]any)
			if got := call["function"].(map[string]any)["arguments"]; got != generated {
				t.Fatalf("arguments returned %q, want the model's bytes %q", got, generated)
			}
			call["function"].(map[string]any)["arguments"] = tc.sent
			msgs = append(msgs, msg, map[string]any{"role": "tool", "tool_call_id": call["id"], "content": "ok"})
			if code, out := h.chat(t, "args", map[string]any{"messages": msgs, "tools": []any{bookTool}}); code != 200 {
				t.Fatalf("second call: %d %v", code, out)
			}
			_, info := h.do(t, "GET", "/v1/sessions/args", "", nil)
			if info["template_drift"] != float64(0) {
				t.Fatalf("re-serialized arguments drifted: %v", info)
			}
			h.finish(t, "args", 1)
			trajs := trajectories(t, h.kc, 1, 5*time.Second)
			if len(trajs) != 1 {
				t.Fatalf("%d trajectories", len(trajs))
			}
			checkTokenExact(t, h.tok, trajs[0], h.got.all(), nil)
			text, _ := h.tok.Decode(h.got.all()[1])
			if !strings.Contains(text, generated) {
				t.Fatalf("second prompt lacks the model's own arguments %s:\n%s", generated, text)
			}
		})
	}
	// Arguments whose value changed (a number rounded by a double) are a
	// different conversation: drift, and the prompt renders what was sent.
	t.Run("changed value drifts", func(t *testing.T) {
		h := newHarness(t, llmtest.Sequence(llmtest.Reply{Raw: "<tool_call>\n{\"name\": \"book\", \"arguments\": {\"big\": 12345678901234567890}}\n</tool_call>"}, llmtest.Reply{Content: "ok"}))
		msgs := []any{map[string]any{"role": "user", "content": "Book it."}}
		_, out := h.chat(t, "changed", map[string]any{"messages": msgs, "tools": []any{bookTool}})
		msg, _ := firstChoice(t, out)
		call := msg["tool_calls"].([]any)[0].(map[string]any)
		call["function"].(map[string]any)["arguments"] = `{"big": 12345678901234567000}`
		msgs = append(msgs, msg, map[string]any{"role": "tool", "tool_call_id": call["id"], "content": "ok"})
		if code, out := h.chat(t, "changed", map[string]any{"messages": msgs, "tools": []any{bookTool}}); code != 200 {
			t.Fatalf("%d %v", code, out)
		}
		if _, info := h.do(t, "GET", "/v1/sessions/changed", "", nil); info["template_drift"] != float64(1) {
			t.Fatalf("a changed argument value did not drift: %v", info)
		}
	})
}

// Text content sent as several parts is joined as the serving engine joins
// them for Qwen3's string-content template: SGLang (the default backend)
// with a space, vLLM with a newline; text_parts_join overrides.
func TestTextPartsJoinedAsTheEngine(t *testing.T) {
	parts := []any{map[string]any{"type": "text", "text": "Can you check my reservations?"}, map[string]any{"type": "text", "text": "I am Mia."}}
	for _, tc := range []struct {
		join, want string
	}{{"", "reservations? I am"}, {"auto", "reservations? I am"}, {"newline", "reservations?\nI am"}, {"space", "reservations? I am"}, {"none", "reservations?I am"}} {
		t.Run("join="+tc.join, func(t *testing.T) {
			h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}), func(c *proxy.Config) { c.TextPartsJoin = tc.join })
			if code, out := h.chat(t, "parts", map[string]any{"messages": []any{map[string]any{"role": "user", "content": parts}}}); code != 200 {
				t.Fatalf("%d %v", code, out)
			}
			text, _ := h.tok.Decode(h.got.all()[0])
			if !strings.Contains(text, "<|im_start|>user\nCan you check my "+tc.want+" Mia.<|im_end|>") {
				t.Fatalf("prompt %q does not join the parts as %q", text, tc.want)
			}
		})
	}
	cfg := proxy.DefaultConfig()
	cfg.TextPartsJoin = "tab"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "text_parts_join") {
		t.Fatalf("text_parts_join=tab: %v", err)
	}
}

// A call, reward, finish or abort naming an ended session is final: 410
// with x-should-retry: false, which the OpenAI SDKs do not retry (they
// retry 408, 409, 429 and ≥ 500 unless that header says false).
func TestEndedSessionIsFinal(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	if code, out := h.chat(t, "ended", userTurn("hi")); code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	h.finish(t, "ended", 1)
	for _, c := range []struct{ path, token, body string }{
		{"/v1/chat/completions", "k;session=ended", `{"messages":[{"role":"user","content":"again"}]}`},
		{"/v1/sessions/ended/finish", "k", `{"reward":1}`},
		{"/v1/sessions/ended/reward", "k", `{"reward":1}`},
		{"/v1/sessions/ended/abort", "k", `{"error":"x"}`},
	} {
		req, _ := http.NewRequest("POST", h.url+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if e := errorOf(t, out); resp.StatusCode != http.StatusGone || e["code"] != "session_ended" || resp.Header.Get("x-should-retry") != "false" {
			t.Fatalf("%s after the end: %d x-should-retry=%q %v", c.path, resp.StatusCode, resp.Header.Get("x-should-retry"), e)
		}
	}
}

// Requests OpenAI refuses about tools are refused, not silently accepted:
// a tool_choice that needs tools without tools, a named tool that is not
// among them, the deprecated functions / function_call.
func TestToolChoiceNeedsTools(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	user := `[{"role":"user","content":"x"}]`
	tools := `[{"type":"function","function":{"name":"book","parameters":{}}}]`
	for _, tc := range []struct {
		name, body, param string
	}{
		{"named without tools", `{"messages":` + user + `,"tool_choice":{"type":"function","function":{"name":"book"}}}`, "tool_choice"},
		{"required without tools", `{"messages":` + user + `,"tool_choice":"required"}`, "tool_choice"},
		{"auto without tools", `{"messages":` + user + `,"tool_choice":"auto"}`, "tool_choice"},
		{"named not in tools", `{"messages":` + user + `,"tools":` + tools + `,"tool_choice":{"type":"function","function":{"name":"cancel"}}}`, "tool_choice"},
		{"legacy functions", `{"messages":` + user + `,"functions":[{"name":"book","parameters":{}}]}`, "functions"},
		{"legacy function_call", `{"messages":` + user + `,"function_call":"auto"}`, "function_call"},
		{"legacy assistant function_call", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"function_call":{"name":"book","arguments":"{}"}},{"role":"user","content":"y"}]}`, "messages[1].function_call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := h.do(t, "POST", "/v1/chat/completions", "k;session=tc", []byte(tc.body))
			if e := errorOf(t, out); code != 400 || e["param"] != tc.param {
				t.Fatalf("%d %v, want 400 with param %s", code, e, tc.param)
			}
		})
	}
	if n := len(h.got.all()); n != 0 {
		t.Fatalf("the policy was called %d times for refused requests", n)
	}
	for _, body := range []string{
		`{"messages":` + user + `,"tool_choice":"none"}`,
		`{"messages":` + user + `,"tools":` + tools + `,"tool_choice":{"type":"function","function":{"name":"book"}}}`,
		`{"messages":` + user + `,"tools":` + tools + `,"tool_choice":"required","functions":null,"function_call":null}`,
	} {
		if code, out := h.do(t, "POST", "/v1/chat/completions", "k;session=tc-ok", []byte(body)); code != 200 {
			t.Fatalf("%s: %d %v", body, code, out)
		}
	}
}

// Bodies that are not JSON, or JSON of the wrong shape, are answered with
// what is wrong and where: the field's path, the type expected and found,
// the line and column; never the decoder's internal wording.
func TestJSONErrorsSayWhatAndWhere(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	for _, tc := range []struct {
		name, path, body, param string
		want                    []string
	}{
		{"NUL byte", "/v1/chat/completions", "\x00{}", "", []string{"unexpected byte 0x00", "where a JSON value should start", "line 1, column 1, byte 0"}},
		{"truncated", "/v1/chat/completions", `{"messages":[{"role":"user",`, "", []string{"ends after 28 bytes", "truncated"}},
		{"empty", "/v1/chat/completions", "  ", "", []string{"request body is empty"}},
		{"missing colon", "/v1/chat/completions", "{\n  \"messages\" [", "", []string{`unexpected character '['`, "':' should follow", "line 2, column 14"}},
		{"trailing data", "/v1/chat/completions", `{"messages":[]} {}`, "", []string{"after the end of the JSON value"}},
		{"messages not an array", "/v1/chat/completions", `{"messages":"hi"}`, "messages", []string{"messages: expected an array, got a JSON string", "line 1"}},
		{"role not a string", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"role":5}]}`, "messages[1].role", []string{"messages[1].role: expected a string, got a JSON number"}},
		{"n fractional", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":1.5}`, "n", []string{"n: expected an integer, got the number 1.5"}},
		{"arguments an object", "/v1/chat/completions", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{"a":1}}}]}]}`, "messages[0].tool_calls[0].function.arguments", []string{"expected a string, got a JSON object"}},
		{"top level array", "/v1/chat/completions", `[]`, "", []string{"must be a JSON object", "got a JSON array"}},
		{"reward a string", "/v1/sessions/x/reward", `{"reward":"high"}`, "reward", []string{"reward: expected a number, got a JSON string"}},
		{"finish tags not strings", "/v1/sessions/x/finish", `{"reward":1,"tags":{"a":1}}`, "tags.a", []string{"tags.a: expected a string, got a JSON number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := h.do(t, "POST", tc.path, "k;session=j", []byte(tc.body))
			e := errorOf(t, out)
			msg, _ := e["message"].(string)
			param, _ := e["param"].(string)
			if code != 400 || e["type"] != "invalid_request_error" || param != tc.param {
				t.Fatalf("%d param %q: %v", code, param, e)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("message %q lacks %q", msg, w)
				}
			}
			for _, internal := range []string{"json:", "Go struct", "Go value", "looking for beginning"} {
				if strings.Contains(msg, internal) {
					t.Fatalf("message %q speaks the decoder's language (%q)", msg, internal)
				}
			}
		})
	}
}

// Session, task and group names are bounded (256 bytes), valid UTF-8 and
// free of control characters, wherever they come from; the rule is in the
// answer.
func TestSessionIDRules(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	long := strings.Repeat("s", proxy.MaxIDBytes+1)
	for _, tc := range []struct {
		name, token string
		headers     map[string]string
		param, want string
	}{
		{"long session in the token", "k;session=" + long, nil, "session", "257 bytes; at most 256"},
		{"long session header", "k", map[string]string{proxy.HeaderSession: long}, "session", "at most 256"},
		{"900 KB session", "k;session=" + strings.Repeat("x", 900<<10), nil, "session", "at most 256"},
		{"invalid UTF-8 session", "k;session=%FF%FE", nil, "session", "not valid UTF-8"},
		{"invalid UTF-8 session header", "k", map[string]string{proxy.HeaderSession: "ab\xffcd"}, "session", "not valid UTF-8"},
		{"control character", "k;session=a%00b", nil, "session", "control character"},
		{"long task", "k;session=ok;task=" + long, nil, "task", "at most 256"},
		{"invalid group", "k;session=ok;group=%C3", nil, "group", "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"x"}]}`))
			req.Header.Set("Authorization", "Bearer "+tc.token)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var out map[string]any
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("%d %q", resp.StatusCode, raw)
			}
			e := errorOf(t, out)
			if resp.StatusCode != 400 || e["param"] != tc.param || !strings.Contains(e["message"].(string), tc.want) {
				t.Fatalf("%d %v, want 400 param %s saying %q", resp.StatusCode, e, tc.param, tc.want)
			}
			if len(raw) > 1024 {
				t.Fatalf("the answer is %d bytes: it echoes the id", len(raw))
			}
		})
	}
	if h.srv.OpenSessions() != 0 {
		t.Fatalf("%d sessions opened by refused ids", h.srv.OpenSessions())
	}
	ok := strings.Repeat("é", proxy.MaxIDBytes/2) // 256 bytes, 128 characters
	if code, out := h.do(t, "POST", "/v1/chat/completions", "k;session="+ok, userTurn("x")); code != 200 {
		t.Fatalf("a 256-byte id: %d %v", code, out)
	}
	if code, out := h.do(t, "GET", "/v1/sessions/"+long, "k", nil); code != 400 || errorOf(t, out)["param"] != "session" {
		t.Fatalf("session API with a long id: %d %v", code, out)
	}
}

// A malformed Authorization header is refused without echoing any part of
// it: it carries the API key.
func TestCredentialsNeverEchoed(t *testing.T) {
	t.Setenv("TAU2_PROXY_TEST_KEYS", "sk-good")
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}), func(c *proxy.Config) {
		c.Auth = proxy.AuthConfig{APIKeysEnv: "TAU2_PROXY_TEST_KEYS"}
	})
	const secret = "c2stc2VjcmV0LWtleQ"
	for _, auth := range []string{
		"Bearer " + secret + "==",                   // base64 padding
		"Bearer " + secret + "=;session=a",          //
		"Bearer sk-good;session=a;" + secret + "=x", // unknown field
		"Bearer sk-good;session=a;" + secret,        // not name=value
		"Bearer sk-good;session=a;trial=" + secret,  //
		"Bearer sk-good;session=" + secret + "%zz",  // bad escape
		"Basic " + secret + "==",                    //
		"Bearer " + secret,                          // wrong key
	} {
		req, _ := http.NewRequest("POST", h.url+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 && resp.StatusCode != 401 {
			t.Fatalf("%q: %d %s", auth, resp.StatusCode, raw)
		}
		if bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte(secret[:8])) {
			t.Fatalf("%q: the answer echoes the credential: %s", auth, raw)
		}
	}
}

// A request whose text cannot fit engine_max_tokens is refused before it is
// tokenized: a 7.5 MB conversation costs tens of MB, not the ~800 MB of
// tokenizing two million tokens to learn it.
func TestOversizedConversationRefusedCheaply(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	handler := h.srv.Handler()
	for _, tc := range []struct {
		name string
		msgs []any
	}{
		{"one message", []any{map[string]any{"role": "user", "content": strings.Repeat("hello world, how are you? ", 300_000)}}},
		{"many messages", func() []any {
			var m []any
			for range 30_000 {
				m = append(m, map[string]any{"role": "user", "content": strings.Repeat("word ", 50)})
			}
			return m
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"model": "m", "messages": tc.msgs})
			req := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer k;session=big")
			rec := httptest.NewRecorder()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			handler.ServeHTTP(rec, req)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%.1f MB body: %.1f MB allocated", float64(len(body))/1e6, float64(alloc)/1e6)
			var out map[string]any
			_ = json.Unmarshal(rec.Body.Bytes(), &out)
			if e := errorOf(t, out); rec.Code != 400 || e["code"] != "context_length_exceeded" {
				t.Fatalf("%d %v", rec.Code, e)
			}
			if limit := 12 * uint64(len(body)); alloc > limit {
				t.Fatalf("refusing a %d-byte request allocated %d bytes (> %d): it was tokenized", len(body), alloc, limit)
			}
		})
	}
}

// A tool message must answer a preceding assistant message's tool_calls, as OpenAI requires: the
// proxy answered 200 and rendered a tool response the model never asked for.
func TestToolMessageAnswersACall(t *testing.T) {
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"book","arguments":"{}"}}]}`
	tool := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"done"}` }
	for _, tc := range []struct {
		name, msgs, param string
	}{
		{"no call before", `[{"role":"user","content":"x"},` + tool("call_1") + `]`, "messages[1]"},
		{"a user turn between", `[{"role":"user","content":"x"},` + call + `,{"role":"user","content":"y"},` + tool("call_1") + `]`, "messages[3]"},
		{"unknown id", `[{"role":"user","content":"x"},` + call + `,` + tool("call_9") + `]`, "messages[2].tool_call_id"},
		{"first message", `[` + tool("call_1") + `]`, "messages[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := h.do(t, "POST", "/v1/chat/completions", "k;session=tm", []byte(`{"messages":`+tc.msgs+`}`))
			if e := errorOf(t, out); code != 400 || e["param"] != tc.param {
				t.Fatalf("%d %v, want 400 with param %s", code, e, tc.param)
			}
		})
	}
	if n := len(h.got.all()); n != 0 {
		t.Fatalf("the policy was called %d times for refused requests", n)
	}
	for i, msgs := range []string{
		`[{"role":"user","content":"x"},` + call + `,` + tool("call_1") + `]`,
		`[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"book","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"book","arguments":"{}"}}]},` + tool("b") + `,` + tool("a") + `]`,
		`[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"book","arguments":"{}"}}]},` + tool("whatever") + `]`,
	} {
		if code, out := h.do(t, "POST", "/v1/chat/completions", "k;session=tm-ok-"+strconv.Itoa(i), []byte(`{"messages":`+msgs+`}`)); code != 200 {
			t.Fatalf("%s: %d %v", msgs, code, out)
		}
	}
}
