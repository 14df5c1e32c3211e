package protocol

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the goldens in testdata/")

func ptr[T any](v T) *T { return &v }

// shape is one wire shape: a value, the golden file holding its encoding, and a fresh value
// of its type to decode the golden into.
type shape struct {
	name  string
	value any
	fresh func() any
}

func shapes() []shape {
	meta := MetaInfo{ID: "ep17-t3", FinishReason: StopOnToken(151645), PromptTokens: 9, CompletionTokens: 2, CachedTokens: 4,
		WeightVersion: "step-12", WeightVersions: []VersionSpan{{Version: "step-11", Start: 0, End: 1}, {Version: "step-12", Start: 1, End: 2}},
		E2ELatency: 0.25}
	meta.SetOutputLogprobs(198, []int32{151657, 151645}, []float64{-0.5, math.Inf(-1)})
	text := "<tool_call>"
	lps := NewCompletionLogprobs([]string{"é", "token_id:7", "ab"}, []float64{-0.25, -1e6, 0})
	assistant := AssistantMessage("", ptr("plan"), []ToolCall{NewToolCall("call_1", "get_user_details", `{"user_id": "u1"}`)})
	first := ChatChunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1790000000, Model: "m",
		Choices: []ChatChunkChoice{{Delta: ChatDelta{Role: "assistant", Content: JSONNull, Refusal: JSONNull}}}}
	first.SetUsage(nil)
	last := ChatChunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1790000000, Model: "m", Choices: []ChatChunkChoice{}}
	last.SetUsage(&Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7})
	return []shape{
		{"generate_request", GenerateRequest{InputIDs: IDs([]int32{151644, 8948, 198}), SamplingParams: &SamplingParams{
			MaxNewTokens: ptr(1024), Temperature: ptr(0.0), TopP: ptr(1.0), TopK: ptr(-1), MinP: ptr(0.0), StopTokenIDs: []int64{151645},
			SamplingSeed: ptr(int64(7))}, ReturnLogprob: true, Rid: "ep17-t3"}, func() any { return new(GenerateRequest) }},
		{"generate_response", GenerateResponse{Text: &text, OutputIDs: []int32{151657, 151645}, MetaInfo: meta}, func() any { return new(GenerateResponse) }},
		{"finish_length", StoppedAtLength(12), func() any { return new(FinishReason) }},
		{"finish_abort", Aborted("aborted by /abort_request"), func() any { return new(FinishReason) }},
		{"finish_stop_string", StopOnString("</s>"), func() any { return new(FinishReason) }},
		{"completion_request", CompletionRequest{Model: "qwen3", Prompt: IDs([]int32{151644, 77091, 198}), MaxTokens: ptr(1024),
			Temperature: ptr(1.0), TopP: ptr(1.0), TopK: ptr(-1), MinP: ptr(0.0), Logprobs: ptr(0), ReturnTokenIDs: ptr(true),
			ReturnTokensAsTokenIDs: ptr(true), SkipSpecialTokens: ptr(false), RequestID: "r1"}, func() any { return new(CompletionRequest) }},
		{"completion_response", CompletionResponse{ID: "cmpl-1", Object: "text_completion", Created: 1790000000, Model: "qwen3",
			Choices: []CompletionChoice{{Text: "éab", Logprobs: lps, FinishReason: ptr("stop"), TokenIDs: []int32{1, 7, 2}, PromptTokenIDs: []int32{5}}},
			Usage:   NewUsage(1, 3)}, func() any { return new(CompletionResponse) }},
		{"chat_request", ChatRequest{Model: "m", Messages: []ChatMessage{
			{Role: "system", Content: JSONString("Be brief.")},
			{Role: "assistant", Content: JSONNull, ToolCalls: []ToolCall{NewToolCall("call_1", "f", `{"a": 1}`)}},
			{Role: "tool", Content: JSONString("ok"), ToolCallID: "call_1"}},
			Tools:      []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}`)},
			ToolChoice: JSONString("auto"), Temperature: ptr(0.0), Logprobs: ptr(true), MaxCompletionTokens: ptr(64),
			ChatTemplateKwargs: map[string]any{"enable_thinking": false}}, func() any { return new(ChatRequest) }},
		{"chat_response", ChatResponse{ID: "chatcmpl-1", Object: "chat.completion", Created: 1790000000, Model: "m",
			Choices: []ChatChoice{{Message: assistant, FinishReason: "tool_calls", MatchedStop: 151645, TokenIDs: []int32{1, 2},
				Logprobs: &ChatLogprobs{Content: []ChatTokenLogprob{{Token: "\ufffd", Bytes: []int{0xe2, 0x82}, Logprob: ClampLogprob(math.NaN()), TopLogprobs: []ChatTopLogprob{}}}}}},
			Usage: NewUsage(3, 2), PromptTokenIDs: []int32{1, 2, 3}, SGLExt: &SGLExt{WeightVersion: "3", WeightVersions: []VersionSpan{{"3", 0, 2}}}},
			func() any { return new(ChatResponse) }},
		{"chat_chunk_first", first, func() any { return new(ChatChunk) }},
		{"chat_chunk_tool", ChatChunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1790000000, Model: "m",
			Choices: []ChatChunkChoice{{Delta: ChatDelta{ToolCalls: []ToolCall{{Index: ptr(0), Function: ToolCallFunction{Arguments: `{"a"`}}}}}}},
			func() any { return new(ChatChunk) }},
		{"chat_chunk_usage", last, func() any { return new(ChatChunk) }},
		{"update_weights_from_disk_request", UpdateWeightsFromDiskRequest{ModelPath: "/ckpt/step-3", WeightVersion: ptr("3"), FlushCache: ptr(true)},
			func() any { return new(UpdateWeightsFromDiskRequest) }},
		{"update_weights_from_ipc_request", ipcRequestExample(), func() any { return new(UpdateWeightsFromIPCRequest) }},
		{"init_weights_update_group_request", initGroupExample(), func() any { return new(InitWeightsUpdateGroupRequest) }},
		{"update_weights_from_distributed_request", distributedExample(), func() any { return new(UpdateWeightsFromDistributedRequest) }},
		{"update_weights_response", UpdateWeightsResponse{Success: ptr(true), Message: "Succeeded to update model weights. Weight version updated to 3.", NumPausedRequests: 0},
			func() any { return new(UpdateWeightsResponse) }},
		{"update_weight_version_request", UpdateWeightVersionRequest{NewVersion: ptr("4"), AbortAllRequests: ptr(false)}, func() any { return new(UpdateWeightVersionRequest) }},
		{"vllm_update_weights_request", NewVLLMUpdateWeights("/ckpt/step-3"), func() any { return new(VLLMUpdateWeightsRequest) }},
		{"vllm_finish_weight_update_request", FinishWeightUpdateRequest{WeightVersion: ptr("3")}, func() any { return new(FinishWeightUpdateRequest) }},
		{"control_paused", ControlResponse{Status: "paused"}, func() any { return new(ControlResponse) }},
		{"models", Models(NewModel("qwen3", "tau2rl", 0)), func() any { return new(ModelList) }},
		{"model_info", ModelInfo{ModelPath: "/ckpt/step-3", IsGeneration: true, WeightVersion: "3", ModelType: "qwen3",
			Architectures: []string{"Qwen3ForCausalLM"}, GPUUUID: "GPU-5e2b0c3a-1f4d-4b6e-9a70-3c2d1e0f9a8b", WeightSync: []string{WeightSyncNCCL}}, func() any { return new(ModelInfo) }},
		{"error_server", ServerError(400, "input_ids cannot be empty."), func() any { return new(ErrorResponse) }},
		{"error_api", APIError("invalid_request_error", "messages must not be empty", "messages", ""), func() any { return new(ErrorResponse) }},
	}
}

// TestShapes encodes one value of every wire shape and compares it with its golden in
// testdata/ (go test -update rewrites them), then decodes the golden and encodes it again: the
// same bytes, so decoding loses nothing a server sends.
func TestShapes(t *testing.T) {
	for _, s := range shapes() {
		t.Run(s.name, func(t *testing.T) {
			got, err := json.MarshalIndent(s.value, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", s.name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update once to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoding differs from %s:\n got %s\nwant %s", path, got, want)
			}
			v := s.fresh()
			if err := json.Unmarshal(want, v); err != nil {
				t.Fatalf("decode %s: %v", path, err)
			}
			again, err := json.MarshalIndent(reflect.ValueOf(v).Elem().Interface(), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if string(append(again, '\n')) != string(want) {
				t.Fatalf("decode then encode of %s differs:\n got %s\nwant %s", path, again, want)
			}
		})
	}
}

// TestDecodeServerExamples decodes the examples of docs/INFERENCE.md and the shared
// inference-servers reference, as SGLang and vLLM send them, including fields tau2rl's types
// do not hold.
func TestDecodeServerExamples(t *testing.T) {
	var g GenerateResponse
	if err := json.Unmarshal([]byte(`{"text": "x", "output_ids": [151657, 198, 151645],
	 "meta_info": {"id": "ep17-t3", "finish_reason": {"type": "stop", "matched": 151645}, "prompt_tokens": 2310,
	  "weight_version": "step-12", "num_retractions": 0, "input_token_logprobs": [[null, 198, null]],
	  "output_token_logprobs": [[-0.00031, 151657, null], [-0.0001, 198, "\n"], [-0.0008, 151645, null]],
	  "output_token_logprobs_length": 3, "reasoning_tokens": 0, "completion_tokens": 3, "cached_tokens": 2304,
	  "e2e_latency": 0.41, "spec_verify_ct": 0}}`), &g); err != nil {
		t.Fatal(err)
	}
	m := g.MetaInfo
	if id, ok := m.FinishReason.MatchedToken(); !ok || id != 151645 || m.CachedTokens != 2304 || len(m.OutputTokenLogprobs) != 3 ||
		*m.OutputTokenLogprobs[0].Logprob != -0.00031 || *m.OutputTokenLogprobs[1].Text != "\n" || m.InputTokenLogprobs[0].Logprob != nil {
		t.Fatalf("generate response decoded as %+v", m)
	}
	var c CompletionResponse
	if err := json.Unmarshal([]byte(`{"id": "cmpl-5b0e", "object": "text_completion", "created": 1790000000, "model": "qwen3",
	 "choices": [{"index": 0, "text": "<tool_call>", "logprobs": {"text_offset": [0, 15], "token_logprobs": [-0.0003, null],
	   "tokens": ["token_id:151657", "token_id:198"], "top_logprobs": [{"token_id:151657": -0.0003}, null]},
	   "finish_reason": "stop", "stop_reason": null, "token_ids": [151657, 198], "prompt_token_ids": [151644],
	   "prompt_logprobs": null, "routed_experts": null}],
	 "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3, "prompt_tokens_details": null},
	 "service_tier": null, "system_fingerprint": null, "kv_transfer_params": null}`), &c); err != nil {
		t.Fatal(err)
	}
	ch := c.Choices[0]
	if *ch.FinishReason != "stop" || ch.StopReason != nil || ch.Logprobs.TokenLogprobs[1] != nil || ch.TokenIDs[1] != 198 {
		t.Fatalf("completion response decoded as %+v", ch)
	}
}

// TestTextOffset pins vLLM's text_offset rule: cumulative code points (Python len) of the
// reported token strings, the "token_id:N" strings included, never bytes.
func TestTextOffset(t *testing.T) {
	for _, c := range []struct {
		tokens []string
		want   []int
	}{
		{[]string{"a", "bc", "d"}, []int{0, 1, 3}},
		{[]string{"é", "€x", "y"}, []int{0, 1, 3}},                  // 2- and 3-byte runes count 1 each
		{[]string{"\ufffd", "z"}, []int{0, 1}},                      // a partial UTF-8 token, decoded lossily
		{[]string{"token_id:151657", "token_id:198"}, []int{0, 15}}, // return_tokens_as_token_ids
		{nil, []int{}},
	} {
		got := NewCompletionLogprobs(c.tokens, make([]float64, len(c.tokens)))
		if !reflect.DeepEqual(got.TextOffset, c.want) {
			t.Errorf("%q: text_offset %v, want %v", c.tokens, got.TextOffset, c.want)
		}
	}
}

func TestClampLogprob(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{
		{-0.5, -0.5}, {0, 0}, {-9999, -9999}, {-10000, -9999}, {math.Inf(-1), -9999}, {math.NaN(), -9999}, {math.Inf(1), 0},
	} {
		if got := ClampLogprob(c.in); got != c.want {
			t.Errorf("ClampLogprob(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestTokenIDs(t *testing.T) {
	for _, c := range []struct {
		raw, err string
		want     []int32
	}{
		{`[1, 2, 3]`, "", []int32{1, 2, 3}},
		{``, "is required", nil},
		{`null`, "is required", nil},
		{`[]`, "cannot be empty", nil},
		{`[[1, 2], [3]]`, "batch requests", nil},
		{`["a"]`, "list of integer token ids", nil},
		{`"hello"`, "list of integer token ids", nil},
		{`[2147483648]`, "outside the vocabulary", nil},
		{`[-2147483649]`, "outside the vocabulary", nil},
		{`[1.5]`, "list of integer token ids", nil},
	} {
		got, err := TokenIDs("input_ids", json.RawMessage(c.raw))
		switch {
		case c.err == "" && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("%s: %v %v, want %v", c.raw, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "input_ids")):
			t.Errorf("%s: error %v, want one naming input_ids with %q", c.raw, err, c.err)
		}
	}
}

func TestStopStringsAndIDs(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want []string
		bad  bool
	}{{``, nil, false}, {`null`, nil, false}, {`"x"`, []string{"x"}, false}, {`["a", ""]`, []string{"a", ""}, false}, {`5`, nil, true}, {`[1]`, nil, true}} {
		got, err := StopStrings(json.RawMessage(c.raw))
		if (err != nil) != c.bad || !reflect.DeepEqual(got, c.want) {
			t.Errorf("StopStrings(%s) = %q, %v", c.raw, got, err)
		}
	}
	if _, err := StopIDs([]int64{1, -1}); err == nil || !strings.Contains(err.Error(), "stop_token_ids[1]") {
		t.Errorf("StopIDs: %v", err)
	}
	if got, err := StopIDs([]int64{151645}); err != nil || got[0] != 151645 {
		t.Errorf("StopIDs: %v %v", got, err)
	}
}

func TestLogprobTripleRejects(t *testing.T) {
	for _, bad := range []string{`[]`, `[-1, 2]`, `[-1, 2, null, 4]`, `["x", 2, null]`, `[-1, "2", null]`, `[-1, 2, 3]`, `{}`, `[-1, 4294967296, null]`} {
		var tr LogprobTriple
		if err := json.Unmarshal([]byte(bad), &tr); err == nil {
			t.Errorf("%s: decoded as %+v, want an error", bad, tr)
		}
	}
}

func TestChatRequestHelpers(t *testing.T) {
	var r ChatRequest
	if err := json.Unmarshal([]byte(`{"messages": [], "max_tokens": 5, "chat_template_kwargs": {"enable_thinking": "no"}}`), &r); err != nil {
		t.Fatal(err)
	}
	if n, field := r.MaxCompletion(); *n != 5 || field != "max_tokens" {
		t.Errorf("MaxCompletion %v %s", *n, field)
	}
	if _, err := r.EnableThinking(); err == nil {
		t.Error("enable_thinking \"no\": want an error")
	}
	for _, c := range []struct {
		raw       string
		tools     bool
		parse, ok bool
	}{{``, true, true, true}, {`null`, false, false, true}, {`"auto"`, true, true, true}, {`"none"`, true, false, true},
		{`"required"`, true, false, false}, {`{"type": "function", "function": {"name": "f"}}`, true, false, false}} {
		parse, err := ToolChoiceAutoOrNone(json.RawMessage(c.raw), c.tools)
		if parse != c.parse || (err == nil) != c.ok {
			t.Errorf("tool_choice %s: %v %v", c.raw, parse, err)
		}
	}
}
