package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"tau2rl/lib/inference/protocol"
)

// ChatConfig configures a chat-completions client (user simulator, NL
// judge, baseline agents).
type ChatConfig struct {
	Endpoint EndpointConfig `yaml:"endpoint"`
	// Model is the default model name of requests that leave it empty.
	Model string `yaml:"model"`
}

// DefaultChatConfig returns a config with DefaultEndpointConfig (with a
// shorter 120 s attempt timeout, as AReaL gives its user simulator).
func DefaultChatConfig() ChatConfig {
	e := DefaultEndpointConfig()
	e.RequestTimeout = 120 * time.Second
	return ChatConfig{Endpoint: e}
}

// ChatRequest is a chat completion request. It wraps go-openai's request
// and fixes its gaps: Temperature and TopP are pointers so that 0 is sent
// (go-openai's omitempty drops a zero temperature, which servers then treat
// as their default, usually 1.0), and Extra carries any other body field
// (top_k, min_p, chat_template_kwargs, return_token_ids, skip_special_tokens,
// …), merged into the JSON body at the top level.
type ChatRequest struct {
	openai.ChatCompletionRequest
	Temperature *float32
	TopP        *float32
	Extra       map[string]any
}

// ChatResult is a decoded response plus its raw body, which holds the
// server-specific fields go-openai drops (vLLM/SGLang token_ids,
// prompt_token_ids, meta_info, …); Wire decodes them.
type ChatResult struct {
	openai.ChatCompletionResponse
	Raw []byte
}

// Wire decodes the raw body as the project's one chat-response shape
// (lib/inference/protocol), with the fields go-openai drops: each choice's
// token_ids and matched_stop, the top-level prompt_token_ids (both with
// return_token_ids) and SGLang's sglext (the weight version that sampled it).
func (r *ChatResult) Wire() (protocol.ChatResponse, error) {
	var out protocol.ChatResponse
	if err := json.Unmarshal(r.Raw, &out); err != nil {
		return out, fmt.Errorf("decode chat response: %w", err)
	}
	return out, nil
}

// Chat is an OpenAI-compatible chat-completions client on go-openai, whose
// HTTP goes through an Endpoint (concurrency limit, retries, metrics).
type Chat struct {
	ep    *Endpoint
	oc    *openai.Client
	model string
}

// NewChat builds a chat client with its own endpoint; m may be nil.
func NewChat(cfg ChatConfig, m *Metrics) (*Chat, error) {
	ep, err := NewEndpoint(cfg.Endpoint, m)
	if err != nil {
		return nil, err
	}
	return NewChatOn(ep, cfg.Model), nil
}

// NewChatOn builds a chat client on an existing endpoint.
func NewChatOn(ep *Endpoint, model string) *Chat {
	oc := openai.DefaultConfig(ep.cfg.APIKey)
	oc.BaseURL = ep.base.String()
	oc.HTTPClient = &chatDoer{ep: ep}
	return &Chat{ep: ep, oc: openai.NewClientWithConfig(oc), model: model}
}

type chatCtxKey struct{}

// chatCall carries the per-request body rewrite and the raw response from
// Complete to the doer, through the request's context.
type chatCall struct {
	set map[string]any
	raw []byte
}

// Complete sends one chat completion.
func (c *Chat) Complete(ctx context.Context, req ChatRequest) (*ChatResult, error) {
	const op = "chat"
	r := req.ChatCompletionRequest
	if r.Model == "" {
		r.Model = c.model
	}
	if r.Stream {
		return nil, &Error{Endpoint: c.ep.name, Op: op, Kind: ErrRejected, Err: errors.New("streaming is not supported")}
	}
	call := &chatCall{set: map[string]any{}}
	for k, v := range req.Extra {
		call.set[k] = v
	}
	if req.Temperature != nil {
		call.set["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		call.set["top_p"] = *req.TopP
	}
	resp, err := c.oc.CreateChatCompletion(context.WithValue(ctx, chatCtxKey{}, call), r)
	if err != nil {
		var le *Error
		if errors.As(err, &le) {
			return nil, err
		}
		return nil, &Error{Endpoint: c.ep.name, Op: op, Kind: ErrBadResponse, Err: err, Body: snippet(call.raw)}
	}
	if len(resp.Choices) == 0 {
		return nil, &Error{Endpoint: c.ep.name, Op: op, Kind: ErrBadResponse, Err: errors.New("no choices"), Body: snippet(call.raw)}
	}
	c.ep.metrics.Tokens(c.ep.name, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	return &ChatResult{ChatCompletionResponse: resp, Raw: call.raw}, nil
}

// chatDoer is go-openai's HTTPClient: it applies the body rewrite and sends
// through the Endpoint, so go-openai sees only a final 2xx response or our
// *Error.
type chatDoer struct{ ep *Endpoint }

func (d *chatDoer) Do(req *http.Request) (*http.Response, error) {
	const op = "chat"
	ctx := req.Context()
	call, _ := ctx.Value(chatCtxKey{}).(*chatCall)
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, &Error{Endpoint: d.ep.name, Op: op, Kind: ErrRejected, Err: fmt.Errorf("read request body: %w", err)}
		}
		body = b
	}
	if call != nil && len(call.set) > 0 {
		var err error
		if body, err = mergeJSON(body, call.set); err != nil {
			return nil, &Error{Endpoint: d.ep.name, Op: op, Kind: ErrRejected, Err: err}
		}
	}
	path := strings.TrimPrefix(req.URL.Path, d.ep.base.Path)
	if req.URL.RawQuery != "" {
		path += "?" + req.URL.RawQuery
	}
	// The doer replaces go-openai's auth header with the endpoint's.
	header := http.Header{}
	for _, k := range []string{"OpenAI-Organization", "OpenAI-Beta"} {
		if v := req.Header.Get(k); v != "" {
			header.Set(k, v)
		}
	}
	r, err := d.ep.do(ctx, op, req.Method, path, body, header, func(b []byte) error {
		if !json.Valid(b) {
			return errors.New("response body is not JSON")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if call != nil {
		call.raw = r.body
	}
	return &http.Response{
		Status: http.StatusText(r.status), StatusCode: r.status, Header: r.header,
		Body: io.NopCloser(bytes.NewReader(r.body)), ContentLength: int64(len(r.body)), Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}, nil
}

// mergeJSON sets top-level fields of a JSON object body.
func mergeJSON(body []byte, set map[string]any) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &obj); err != nil {
			return nil, fmt.Errorf("request body is not a JSON object: %w", err)
		}
	}
	for k, v := range set {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("extra field %q: %w", k, err)
		}
		obj[k] = b
	}
	return json.Marshal(obj)
}
