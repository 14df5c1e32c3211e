package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"tau2rl/schemas"
)

// The airline script's tools, as a chat client and as a Responses client
// send them (the same functions).
const (
	chatAirlineTools = `[{"type":"function","function":{"name":"get_user_details","description":"Get the details of a user.","parameters":{"type":"object","properties":{"user_id":{"type":"string"}},"required":["user_id"]}}},` +
		`{"type":"function","function":{"name":"get_reservation_details","description":"Get the details of a reservation.","parameters":{"type":"object","properties":{"reservation_id":{"type":"string"}},"required":["reservation_id"]}}}]`
	responsesAirlineTools = `[{"type":"function","name":"get_user_details","description":"Get the details of a user.","parameters":{"type":"object","properties":{"user_id":{"type":"string"}},"required":["user_id"]}},` +
		`{"type":"function","name":"get_reservation_details","description":"Get the details of a reservation.","parameters":{"type":"object","properties":{"reservation_id":{"type":"string"}},"required":["reservation_id"]}}]`
)

// fixedToolResult answers the airline script's tools without τ² data.
func fixedToolResult(name string, args string) string {
	if name == "get_user_details" {
		return `{"user_id": "mia_li_3668", "reservations": ["NO6JO3", "AIXC49"]}`
	}
	return `{"reservation_details_for": ` + args + `}`
}

// sse reads a Responses event stream: each event's "event:" name and its
// data object.
func sse(tb testing.TB, body io.Reader) []map[string]any {
	tb.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var ev map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
				tb.Fatalf("event data %q: %v", line, err)
			}
			if ev["type"] != name {
				tb.Fatalf("event %q carries type %v", name, ev["type"])
			}
			out = append(out, ev)
		}
	}
	return out
}

// postResponses sends a Responses request; a streamed answer is read as
// events and its final response returned.
func (h *harness) postResponses(tb testing.TB, token string, req map[string]any) (int, map[string]any, []map[string]any) {
	tb.Helper()
	if stream, _ := req["stream"].(bool); !stream {
		code, out := h.do(tb, http.MethodPost, "/v1/responses", token, req)
		return code, out, nil
	}
	b, _ := json.Marshal(req)
	hr, _ := http.NewRequest(http.MethodPost, h.url+"/v1/responses", bytes.NewReader(b))
	hr.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		tb.Fatalf("stream answer %d %q: %s", resp.StatusCode, ct, raw)
	}
	evs := sse(tb, resp.Body)
	for i, ev := range evs {
		if ev["sequence_number"] != float64(i) {
			tb.Fatalf("event %d (%v) has sequence_number %v", i, ev["type"], ev["sequence_number"])
		}
	}
	final := evs[len(evs)-1]
	if final["type"] != "response.completed" {
		tb.Fatalf("last event %v", final["type"])
	}
	return resp.StatusCode, final["response"].(map[string]any), evs
}

// A chat session and a Responses session of the same conversation capture
// the same tokens: every prompt the policy server received and every
// recorded call (prompt, completion, log-probs) are equal, whether the
// Responses client sends the full input, previous_response_id with only the
// new items, or streams.
func TestResponsesSameTokensAsChat(t *testing.T) {
	for _, mode := range []string{"full", "previous", "stream"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, airlineScript())
			const system, user = "You are an airline agent.", "What are my reservations? I am mia_li_3668"

			// The chat session.
			msgs := []any{map[string]any{"role": "system", "content": system}, map[string]any{"role": "user", "content": user}}
			for turn := 0; turn < 5; turn++ {
				code, out := h.chat(t, "chat", map[string]any{"messages": msgs, "tools": json.RawMessage(chatAirlineTools)})
				if code != 200 {
					t.Fatalf("chat: %d %v", code, out)
				}
				msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
				msgs = append(msgs, msg)
				calls, _ := msg["tool_calls"].([]any)
				if len(calls) == 0 {
					break
				}
				for _, c := range calls {
					c := c.(map[string]any)
					f := c["function"].(map[string]any)
					msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c["id"], "content": fixedToolResult(f["name"].(string), f["arguments"].(string))})
				}
			}
			chatPrompts := h.got.all()

			// The Responses session.
			input := []any{map[string]any{"role": "user", "content": user}}
			fresh := slices.Clone(input)
			prev := ""
			var texts []string
			for turn := 0; turn < 5; turn++ {
				req := map[string]any{"model": "qwen3-policy", "instructions": system, "tools": json.RawMessage(responsesAirlineTools), "input": input}
				if mode != "full" {
					req["input"] = fresh
					if prev != "" {
						req["previous_response_id"] = prev
					}
				}
				if mode == "stream" {
					req["stream"] = true
				}
				code, res, _ := h.postResponses(t, "sk-unused;session=responses", req)
				if code != 200 || res["object"] != "response" || res["status"] != "completed" {
					t.Fatalf("responses: %d %v", code, res)
				}
				prev = res["id"].(string)
				output := res["output"].([]any)
				input = append(input, output...)
				fresh = nil
				var calls []map[string]any
				for _, it := range output {
					it := it.(map[string]any)
					switch it["type"] {
					case "function_call":
						calls = append(calls, it)
					case "message":
						texts = append(texts, it["content"].([]any)[0].(map[string]any)["text"].(string))
					}
				}
				if len(calls) == 0 {
					break
				}
				for _, c := range calls {
					item := map[string]any{"type": "function_call_output", "call_id": c["call_id"], "output": fixedToolResult(c["name"].(string), c["arguments"].(string))}
					input = append(input, item)
					fresh = append(fresh, item)
				}
			}
			all := h.got.all()
			respPrompts := all[len(chatPrompts):]
			if len(chatPrompts) != 3 || len(respPrompts) != len(chatPrompts) {
				t.Fatalf("policy calls: chat %d, responses %d; want 3 each", len(chatPrompts), len(respPrompts))
			}
			for i := range chatPrompts {
				if !slices.Equal(chatPrompts[i], respPrompts[i]) {
					a, _ := h.tok.Decode(chatPrompts[i])
					b, _ := h.tok.Decode(respPrompts[i])
					t.Fatalf("call %d: the Responses session's prompt differs from the chat session's:\n%q\nvs\n%q", i, b, a)
				}
			}
			if want := []string{"Let me read two of your reservations.", "I found both reservations; they are confirmed."}; !slices.Equal(texts, want) {
				t.Fatalf("response texts %q, want %q", texts, want)
			}
			h.finish(t, "chat", 1)
			h.finish(t, "responses", 1)
			trajs := trajectories(t, h.kc, 2, 10*time.Second)
			if len(trajs) != 2 {
				t.Fatalf("%d trajectories", len(trajs))
			}
			bySession := map[string]*schemas.Trajectory{}
			for _, tr := range trajs {
				bySession[tr.Tags["session"]] = tr
			}
			c, r := bySession["chat"], bySession["responses"]
			checkTokenExact(t, h.tok, r, respPrompts, nil)
			cp, _ := c.FullPrompts()
			rp, _ := r.FullPrompts()
			for i := range cp {
				if !slices.Equal(cp[i], rp[i]) || !slices.Equal(c.Calls[i].CompletionTokens, r.Calls[i].CompletionTokens) ||
					!slices.Equal(c.Calls[i].BehaviorLogprobs, r.Calls[i].BehaviorLogprobs) {
					t.Fatalf("call %d recorded differently by the two sessions", i)
				}
			}
			if len(c.Messages) != len(r.Messages) || r.Tags["template_drift"] != "" {
				t.Fatalf("conversations: chat %d messages, responses %d; tags %v", len(c.Messages), len(r.Messages), r.Tags)
			}
		})
	}
}

// The stream's events, in order, for an answer with thinking, text and two
// tool calls; every item-scoped event names its item and index, and the
// final response equals the items the events built.
func TestResponsesStreamEvents(t *testing.T) {
	h := newHarness(t, airlineScript())
	input := []any{map[string]any{"role": "user", "content": "hi"},
		map[string]any{"type": "function_call", "call_id": "call_1", "name": "get_user_details", "arguments": `{"user_id": "u"}`},
		map[string]any{"type": "function_call_output", "call_id": "call_1", "output": fixedToolResult("get_user_details", "")}}
	_, res, evs := h.postResponses(t, "session=ev", map[string]any{"input": input, "tools": json.RawMessage(responsesAirlineTools), "stream": true})
	var types []string
	for _, ev := range evs {
		if t := ev["type"].(string); len(types) == 0 || types[len(types)-1] != t {
			types = append(types, t)
		}
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.completed"}
	if !slices.Equal(types, want) {
		t.Fatalf("events (repeats folded):\n%q\nwant\n%q", types, want)
	}
	built := map[float64]map[string]any{}
	for _, ev := range evs {
		switch ev["type"] {
		case "response.output_item.done":
			built[ev["output_index"].(float64)] = ev["item"].(map[string]any)
		case "response.output_text.delta", "response.function_call_arguments.delta":
			if ev["item_id"] == "" || ev["output_index"] == nil {
				t.Fatalf("event without its item: %v", ev)
			}
		}
	}
	output := res["output"].([]any)
	if len(output) != 3 || len(built) != 3 {
		t.Fatalf("%d output items, %d built by events", len(output), len(built))
	}
	for i, it := range output {
		if jsonString(it) != jsonString(built[float64(i)]) {
			t.Fatalf("item %d: final %s, events %s", i, jsonString(it), jsonString(built[float64(i)]))
		}
	}
	created := evs[0]["response"].(map[string]any)
	if created["status"] != "in_progress" || len(created["output"].([]any)) != 0 || created["id"] != res["id"] {
		t.Fatalf("response.created carries %v", created)
	}
	u := res["usage"].(map[string]any)
	if u["input_tokens"].(float64) <= 0 || u["output_tokens"].(float64) <= 0 {
		t.Fatalf("usage %v", u)
	}
}

// previous_response_id and store, and errors in OpenAI's shape.
func TestResponsesPreviousAndErrors(t *testing.T) {
	h := newHarness(t, airlineScript())
	post := func(sid string, req map[string]any) (int, map[string]any) {
		code, out, _ := h.postResponses(t, "session="+sid, req)
		return code, out
	}
	wantError := func(code int, out map[string]any, status int, param, errCode string) {
		t.Helper()
		e, _ := out["error"].(map[string]any)
		if code != status || e == nil || e["type"] == nil || e["message"] == "" || (param != "" && e["param"] != param) || (errCode != "" && e["code"] != errCode) {
			t.Fatalf("answer %d %v, want %d with param %q code %q", code, out, status, param, errCode)
		}
	}
	code, first := post("a", map[string]any{"input": "hi", "store": false})
	if code != 200 || first["store"] != false {
		t.Fatalf("%d %v", code, first)
	}
	// Not stored: it cannot be continued.
	code, out := post("a", map[string]any{"input": "more", "previous_response_id": first["id"]})
	wantError(code, out, 400, "previous_response_id", "previous_response_not_found")
	code, stored := post("a", map[string]any{"input": "hi"})
	if code != 200 || stored["store"] != true {
		t.Fatalf("%d %v", code, stored)
	}
	// Another session does not hold it, and a dangling reference opens no
	// session.
	code, out = post("b", map[string]any{"input": "more", "previous_response_id": stored["id"]})
	wantError(code, out, 400, "previous_response_id", "previous_response_not_found")
	if code, _ := h.do(t, http.MethodGet, "/v1/sessions/b", "", nil); code != 404 {
		t.Fatalf("session b: %d, want 404 (never opened)", code)
	}
	code, next := post("a", map[string]any{"input": "more", "previous_response_id": stored["id"]})
	if code != 200 || next["previous_response_id"] != stored["id"] {
		t.Fatalf("%d %v", code, next)
	}
	for _, tc := range []struct {
		req           map[string]any
		param, code   string
		status        int
		sessionOpened bool
	}{
		{req: map[string]any{"input": []any{}}, param: "input", status: 400},
		{req: map[string]any{"input": "x", "temperature": 3}, param: "temperature", status: 400},
		{req: map[string]any{"input": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_image", "image_url": "u"}}}}}, param: "input[0].content[0]", status: 400},
		{req: map[string]any{"input": "x", "tools": []any{map[string]any{"type": "web_search"}}}, param: "tools[0].type", status: 400},
		{req: map[string]any{"input": "x", "tool_choice": "required"}, param: "tool_choice", status: 400},
		{req: map[string]any{"input": []any{map[string]any{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{not json"}}}, param: "input", status: 400},
	} {
		code, out := post("c", tc.req)
		wantError(code, out, tc.status, tc.param, tc.code)
	}
	if code, _ := h.do(t, http.MethodGet, "/v1/sessions/c", "", nil); code != 404 {
		t.Fatalf("session c: %d, want 404 (refused requests open no session)", code)
	}
	code, out = h.do(t, http.MethodPost, "/v1/responses", "session=c", []byte(`{"input": "x"`))
	wantError(code, out, 400, "", "")
	code, out = h.do(t, http.MethodGet, "/v1/responses", "session=c", nil)
	wantError(code, out, 405, "", "")
	code, out = h.do(t, http.MethodPost, "/v1/responses", "", map[string]any{"input": "x", "previous_response_id": stored["id"]})
	wantError(code, out, 400, "", "missing_session")
	// After the finish, the session's responses are gone with it.
	h.finish(t, "a", 1)
	code, out = post("a", map[string]any{"input": "again", "previous_response_id": next["id"]})
	if e, _ := out["error"].(map[string]any); code < 400 || e == nil || e["code"] != "session_ended" {
		t.Fatalf("after finish: %d %v, want the session_ended error", code, out)
	}
}
