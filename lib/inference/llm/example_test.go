package llm_test

import (
	"context"
	"encoding/json"
	"fmt"

	openai "github.com/sashabaranov/go-openai"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/tokenizer"
)

// byteTokenizer is a byte-level BPE tokenizer without merges (every byte is one token) plus
// Qwen3's chat-markup tokens: enough for the scripted server, and needs no download, so these
// examples run anywhere. Real code loads Qwen3's tokenizer.json with tokenizer.Load.
func byteTokenizer() *tokenizer.Tokenizer {
	// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the others for
	// U+0100 onwards.
	vocab := map[string]int32{}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		vocab[string(r)] = int32(b)
	}
	var added []map[string]any
	for i, s := range []string{"<|endoftext|>", chattemplate.IMStart, chattemplate.IMEnd, "<think>", "</think>",
		"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"} {
		added = append(added, map[string]any{"id": 256 + i, "content": s, "special": i < 3})
	}
	file, err := json.Marshal(map[string]any{
		"added_tokens": added,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\s+|\S+`}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}},
	})
	if err != nil {
		panic(err)
	}
	tok, err := tokenizer.Parse(file)
	if err != nil {
		panic(err)
	}
	return tok
}

// A policy call in token mode, as the producers make it: the prompt is rendered with Qwen3's chat
// template and tokenized by the caller, the server (SGLang's /generate; here the scripted
// loopback server) returns token ids with one log-prob each, which is what training needs.
func ExampleNewPolicy() {
	tok := byteTokenizer()
	srv, err := llmtest.NewServer(tok, llmtest.Constant(llmtest.Reply{Content: "Hello! How can I help?"}))
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	cfg := llm.DefaultPolicyConfig() // SGLang
	cfg.Endpoints[0].BaseURL = srv.URL
	policy, _, err := llm.NewPolicy(cfg, nil) // nil registry: metrics unregistered
	if err != nil {
		panic(err)
	}
	text, err := chattemplate.Render([]chattemplate.Message{
		{Role: "system", Content: "You are a retail agent."}, {Role: "user", Content: "Hi"},
	}, chattemplate.Options{AddGenerationPrompt: true})
	if err != nil {
		panic(err)
	}
	res, err := policy.Generate(context.Background(), llm.GenerateRequest{InputIDs: tok.Encode(text), MaxNewTokens: 64})
	if err != nil {
		panic(err)
	}
	out, err := tok.DecodeSkipSpecial(res.OutputIDs)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", out)
	// 22 bytes of text and <|im_end|>, the stop token, each with the log-prob it was sampled with.
	fmt.Println("finish:", res.FinishReason, "tokens:", len(res.OutputIDs), "log-probs:", len(res.Logprobs))
	// Output:
	// "Hello! How can I help?"
	// finish: stop tokens: 23 log-probs: 23
}

// A chat-completions call (the user simulator, the NL judge, baseline agents) to any
// OpenAI-compatible server; here the scripted server answers with a tool call.
func ExampleChat_Complete() {
	srv, err := llmtest.NewServer(byteTokenizer(), llmtest.Constant(llmtest.Reply{
		ToolCalls: []llmtest.ToolCall{{Name: "get_user_details", Arguments: map[string]any{"user_id": "mia_li_3668"}}},
	}))
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	cfg := llm.DefaultChatConfig()
	cfg.Endpoint.BaseURL, cfg.Model = srv.URL+"/v1", "agent"
	chat, err := llm.NewChat(cfg, nil)
	if err != nil {
		panic(err)
	}
	zero := float32(0)
	res, err := chat.Complete(context.Background(), llm.ChatRequest{
		ChatCompletionRequest: openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleUser, Content: "Who am I? My id is mia_li_3668."},
		}},
		Temperature: &zero, // sent as 0, not dropped
	})
	if err != nil {
		panic(err)
	}
	c := res.Choices[0]
	fmt.Println("finish:", c.FinishReason)
	for _, tc := range c.Message.ToolCalls {
		fmt.Println("tool call:", tc.Function.Name, tc.Function.Arguments)
	}
	// Output:
	// finish: tool_calls
	// tool call: get_user_details {"user_id": "mia_li_3668"}
}
