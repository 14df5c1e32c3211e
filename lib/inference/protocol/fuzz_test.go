package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

// The request parsers read bodies from any client: none may panic, and what they accept must
// survive a round trip through the encoder the project's clients use.

func FuzzDecodeGenerateRequest(f *testing.F) {
	for _, s := range []string{`{"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3, "stop": ["x"]}}`, `{"text": "hi"}`,
		`{"input_ids": [[1], [2]]}`, `{"input_ids": [1], "text": "x"}`, `{"input_ids": [1e3]}`, `[]`, `{"sampling_params": null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeGenerateRequest(body)
		if err != nil {
			return
		}
		if req.SamplingParams == nil {
			t.Fatal("accepted request without sampling_params defaults")
		}
		_, _ = StopStrings(req.SamplingParams.Stop)
		_, _ = StopIDs(req.SamplingParams.StopTokenIDs)
		ids, err := TokenIDs("input_ids", req.InputIDs)
		if err != nil {
			return
		}
		again, err := TokenIDs("input_ids", IDs(ids))
		if err != nil || !reflect.DeepEqual(again, ids) {
			t.Fatalf("ids %v do not round-trip: %v %v", ids, again, err)
		}
	})
}

func FuzzDecodeCompletionRequest(f *testing.F) {
	for _, s := range []string{`{"model": "m", "prompt": [1, 2], "logprobs": 0, "return_token_ids": true}`, `{"prompt": "text"}`,
		`{"prompt": [[1], [2]]}`, `{"prompt": [1], "stop": 5}`, `{"prompt": [1], "max_tokens": null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeCompletionRequest(body)
		if err != nil {
			return
		}
		_, _ = StopStrings(req.Stop)
		if _, err := TokenIDs("prompt", req.Prompt); err == nil && IsString(req.Prompt) {
			t.Fatalf("a text prompt %s read as token ids", req.Prompt)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		if _, err := DecodeCompletionRequest(b); err != nil {
			t.Fatalf("re-encoded request %s does not decode: %v", b, err)
		}
	})
}

func FuzzDecodeChatRequest(f *testing.F) {
	for _, s := range []string{`{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}]}`,
		`{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}`,
		`{"messages": [], "chat_template_kwargs": {"enable_thinking": 1}, "tool_choice": {"type": "function"}}`, `{"stream": true, "stream_options": {"include_usage": true}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req ChatRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		_, _ = req.EnableThinking()
		_, _ = req.MaxCompletion()
		_, _ = ToolChoiceAutoOrNone(req.ToolChoice, len(req.Tools) > 0)
		_, _ = StopStrings(req.Stop)
		if _, err := json.Marshal(req); err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
	})
}

// FuzzDecodeResponses covers the clients' parsers of server answers: SGLang's meta_info (its
// finish_reason and log-prob triples) and vLLM's choices.
func FuzzDecodeResponses(f *testing.F) {
	for _, s := range []string{`{"output_ids": [1], "meta_info": {"finish_reason": {"type": "stop", "matched": 1}, "output_token_logprobs": [[-0.1, 1, null]]}}`,
		`{"choices": [{"text": "", "logprobs": {"tokens": ["token_id:5"], "token_logprobs": [null]}, "finish_reason": "stop", "stop_reason": 5}]}`,
		`{"error": {"message": "x"}}`, `{"output_ids": [1], "meta_info": {"output_token_logprobs": [[1, 2]]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var g GenerateResponse
		if json.Unmarshal(body, &g) == nil {
			g.MetaInfo.FinishReason.MatchedToken()
			if _, err := json.Marshal(g); err != nil {
				t.Fatalf("decoded response does not encode: %v", err)
			}
		}
		var c CompletionResponse
		_ = json.Unmarshal(body, &c)
	})
}

func FuzzDecodeWeightUpdates(f *testing.F) {
	for _, s := range []string{`{"model_path": "/x", "weight_version": "3"}`, `{"update_info": {"path": "/x"}}`, `{"new_version": null}`, `{"weight_version": 3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, v := range []any{new(UpdateWeightsFromDiskRequest), new(VLLMUpdateWeightsRequest), new(FinishWeightUpdateRequest),
			new(UpdateWeightVersionRequest), new(PauseGenerationRequest), new(AbortRequest)} {
			if json.Unmarshal(body, v) == nil {
				if _, err := json.Marshal(v); err != nil {
					t.Fatalf("%T decoded but does not encode: %v", v, err)
				}
			}
		}
	})
}
