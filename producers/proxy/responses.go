package proxy

// The Responses API (POST /v1/responses), which current OpenAI agent
// frameworks (the Agents SDKs, the SDKs' responses.create) use by default.
//
// A Responses request is converted into the chat request of the same
// conversation and then goes the way of every chat call (checkCall, prepare,
// generate, record): same sessions, same token-exact histories, same
// trajectories. The conversion is what makes a Responses session and a chat
// session of one conversation capture the same tokens:
//
//   - instructions become the system message in front;
//   - message items become messages (input_text, output_text and refusal
//     parts become text parts, joined as chat's are);
//   - a reasoning item, an assistant message and the function_call items
//     after it become one assistant message (reasoning_content, content,
//     tool_calls): the items one generation is answered with, so sending a
//     response's output back reproduces the state the proxy recorded;
//   - function_call_output items become tool messages;
//   - function tools ({type, name, description, parameters, …}) become chat
//     tools ({type, function: {name, description, parameters, …}}), the
//     function object keeping the client's fields in the client's order,
//     so the template's tool block is that of a chat client sending the
//     same function.
//
// previous_response_id continues a stored response: the session keeps its
// last storedResponses responses (the conversation after each, without its
// instructions, which OpenAI does not carry over either).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"

	"tau2rl/lib/inference/chattemplate"
)

// ResponsesRequest is the part of OpenAI's Responses API request the proxy
// reads. Other fields (include, reasoning, text, truncation, user,
// prompt_cache_key, service_tier, …) are accepted and ignored, as for chat
// completions; metadata and text are echoed in the response.
type ResponsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Stream             bool              `json:"stream"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	TopK               *int              `json:"top_k"`
	Metadata           json.RawMessage   `json:"metadata"`
	Text               json.RawMessage   `json:"text"`
	ChatTemplateKwargs map[string]any    `json:"chat_template_kwargs"`
	// Refused: the proxy has no background jobs, Conversations API or
	// stored prompts, and pretending would lose the client's turns.
	Background   *bool           `json:"background"`
	Conversation json.RawMessage `json:"conversation"`
	Prompt       json.RawMessage `json:"prompt"`
}

// responsesCall is a parsed and converted Responses request, before its
// session is known (previous_response_id is resolved in the session).
type responsesCall struct {
	req        ResponsesRequest
	items      []ChatMessage     // the input items as chat messages
	tools      []json.RawMessage // chat-shaped function tools
	toolChoice json.RawMessage   // chat-shaped tool_choice
	store      bool
}

// storedResponses is how many responses a session keeps for
// previous_response_id; beyond it the oldest goes. Each holds its
// conversation as message structs whose text is shared with the previous
// stored conversation where equal (put), so a linear conversation costs
// one copy of its text plus a hundred-odd bytes per message per response.
const storedResponses = 16

// responseStore is a session's stored responses, guarded by the session's
// mutex: the conversation after each (its input without the instructions,
// then its output), in the template's form.
type responseStore struct {
	ids  []string // oldest first
	conv map[string][]chattemplate.Message
}

func (rs *responseStore) get(id string) ([]chattemplate.Message, bool) {
	conv, ok := rs.conv[id]
	return conv, ok
}

func (rs *responseStore) put(id string, conv []chattemplate.Message) {
	if rs.conv == nil {
		rs.conv = map[string][]chattemplate.Message{}
	}
	if len(rs.ids) >= storedResponses {
		delete(rs.conv, rs.ids[0])
		rs.ids = rs.ids[1:]
	}
	if n := len(rs.ids); n > 0 {
		shareText(conv, rs.conv[rs.ids[n-1]])
	}
	rs.ids = append(rs.ids, id)
	rs.conv[id] = conv
}

// shareText makes conv's strings and arguments those of prev where they
// are equal, message by message: each stored conversation repeats the one
// before it (a full-input client sends, and a previous_response_id chain
// stores, the whole conversation every time), and would otherwise hold its
// own copy of all of its text.
func shareText(conv, prev []chattemplate.Message) {
	for i := range min(len(conv), len(prev)) {
		c, p := &conv[i], &prev[i]
		if c.Content == p.Content {
			c.Content = p.Content
		}
		if c.ReasoningContent != nil && p.ReasoningContent != nil && *c.ReasoningContent == *p.ReasoningContent {
			c.ReasoningContent = p.ReasoningContent
		}
		for k := range min(len(c.ToolCalls), len(p.ToolCalls)) {
			if bytes.Equal(c.ToolCalls[k].Function.Arguments, p.ToolCalls[k].Function.Arguments) {
				c.ToolCalls[k].Function.Arguments = p.ToolCalls[k].Function.Arguments
			}
		}
	}
}

// readBody reads a request body within limits.max_request_bytes.
func readBody(r *http.Request, cfg Config) ([]byte, error) {
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= cfg.Limits.MaxRequestBytes {
		buf.Grow(int(r.ContentLength) + 1)
	}
	if _, err := buf.ReadFrom(r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &APIError{Status: http.StatusRequestEntityTooLarge, Type: errInvalidRequest, Code: "request_too_large",
				Message: fmt.Sprintf("request body exceeds %d bytes (limits.max_request_bytes)", mbe.Limit)}
		}
		return nil, badRequest("", "read body: %v", err)
	}
	return buf.Bytes(), nil
}

// parseResponses decodes a Responses request and converts what needs no
// session: the input items, the tools and tool_choice.
func parseResponses(body []byte) (*responsesCall, error) {
	rc := &responsesCall{store: true}
	if err := gojson.Unmarshal(body, &rc.req); err != nil {
		// The slow path, as for chat: encoding/json says where and what.
		rc.req = ResponsesRequest{}
		if ae := decodeJSON(body, &rc.req, "a Responses API request (input, instructions, tools, …)"); ae != nil {
			return nil, ae
		}
	}
	req := &rc.req
	if req.Background != nil && *req.Background {
		return nil, badRequest("background", "background responses are not supported: the proxy answers when the generation is done (use stream for events as it goes)")
	}
	if isSet(req.Conversation) {
		return nil, badRequest("conversation", "the Conversations API is not supported: send the input items, or previous_response_id")
	}
	if isSet(req.Prompt) {
		return nil, badRequest("prompt", "stored prompt templates are not supported: send instructions and input")
	}
	if req.Store != nil {
		rc.store = *req.Store
	}
	if m := req.MaxOutputTokens; m != nil && *m < 1 {
		return nil, badRequest("max_output_tokens", "max_output_tokens must be ≥ 1, got %d", *m)
	}
	var err error
	if rc.items, err = inputMessages(req.Input); err != nil {
		return nil, err
	}
	if rc.tools, err = chatTools(req.Tools); err != nil {
		return nil, err
	}
	if rc.toolChoice, err = chatToolChoice(req.ToolChoice, req.Tools); err != nil {
		return nil, err
	}
	return rc, nil
}

func isSet(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null"
}

// chatRequest is the chat request of the conversation: instructions, the
// previous response's conversation (nil without previous_response_id),
// then the input items.
func (rc *responsesCall) chatRequest(prev []chattemplate.Message) ChatRequest {
	req := &rc.req
	var msgs []ChatMessage
	if rc.instructions() != "" {
		msgs = append(msgs, ChatMessage{Role: chattemplate.RoleSystem, Content: jsonText(rc.instructions())})
	}
	for _, m := range prev {
		msgs = append(msgs, wireMessage(m))
	}
	msgs = append(msgs, rc.items...)
	return ChatRequest{Model: req.Model, Messages: msgs, Tools: rc.tools, ToolChoice: rc.toolChoice,
		ParallelToolCalls: req.ParallelToolCalls, MaxCompletionTokens: req.MaxOutputTokens, Temperature: req.Temperature,
		TopP: req.TopP, TopK: req.TopK, ChatTemplateKwargs: req.ChatTemplateKwargs}
}

func (rc *responsesCall) instructions() string {
	if rc.req.Instructions == nil {
		return ""
	}
	return *rc.req.Instructions
}

// jsonText is s as a JSON string (chat content).
func jsonText(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// wireMessage is a template message as a chat client would send it back.
func wireMessage(m chattemplate.Message) ChatMessage {
	cm := ChatMessage{Role: m.Role, Content: jsonText(m.Content), ReasoningContent: m.ReasoningContent, ToolCallID: m.ToolCallID}
	for _, tc := range m.ToolCalls {
		var w WireToolCall
		w.ID, w.Type = tc.ID, "function"
		w.Function.Name, w.Function.Arguments = tc.Function.Name, string(tc.Function.Arguments)
		cm.ToolCalls = append(cm.ToolCalls, w)
	}
	return cm
}

// inputItem is one item of a Responses input list: a message (with or
// without type), function_call, function_call_output or reasoning.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments *string         `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// inputMessages converts input — a string (one user message) or a list of
// items — into chat messages. A reasoning item, an assistant message and
// the function calls after it (the output of one generation) make one
// assistant message; any other item closes it.
func inputMessages(raw json.RawMessage) ([]ChatMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("input", "input: %v", err)
		}
		return []ChatMessage{{Role: chattemplate.RoleUser, Content: jsonText(s)}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("input", "input must be a string or an array of input items")
	}
	var out []ChatMessage
	// The assistant turn still open to the parts of its generation, and
	// which parts it has.
	open := -1
	var hasReasoning, hasContent, hasCalls bool
	startTurn := func() {
		out = append(out, ChatMessage{Role: chattemplate.RoleAssistant})
		open, hasReasoning, hasContent, hasCalls = len(out)-1, false, false, false
	}
	for i, rawItem := range items {
		param := fmt.Sprintf("input[%d]", i)
		var it inputItem
		if err := json.Unmarshal(rawItem, &it); err != nil {
			return nil, itemError(param, err)
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		switch it.Type {
		case "message":
			content, err := messageContent(it.Content, param+".content")
			if err != nil {
				return nil, err
			}
			switch it.Role {
			case chattemplate.RoleAssistant:
				if open < 0 || hasContent || hasCalls {
					startTurn()
				}
				out[open].Content, hasContent = content, true
			case chattemplate.RoleUser, chattemplate.RoleSystem, "developer":
				open = -1
				out = append(out, ChatMessage{Role: it.Role, Content: content})
			default:
				return nil, badRequest(param+".role", "role %q is not user, assistant, system or developer", it.Role)
			}
		case "function_call":
			if it.Name == "" {
				return nil, badRequest(param+".name", "a function_call item needs the function's name")
			}
			if it.CallID == "" {
				return nil, badRequest(param+".call_id", "a function_call item needs its call_id")
			}
			if open < 0 {
				startTurn()
			}
			var tc WireToolCall
			tc.ID, tc.Type, tc.Function.Name = it.CallID, "function", it.Name
			if it.Arguments != nil {
				tc.Function.Arguments = *it.Arguments
			}
			out[open].ToolCalls, hasCalls = append(out[open].ToolCalls, tc), true
		case "function_call_output":
			if it.CallID == "" {
				return nil, badRequest(param+".call_id", "a function_call_output item needs the call_id of its function_call")
			}
			content, err := messageContent(it.Output, param+".output")
			if err != nil {
				return nil, err
			}
			open = -1
			out = append(out, ChatMessage{Role: chattemplate.RoleTool, Content: content, ToolCallID: it.CallID})
		case "reasoning":
			text, err := reasoningText(it, param)
			if err != nil {
				return nil, err
			}
			if open < 0 || hasReasoning || hasContent || hasCalls {
				startTurn()
			}
			out[open].ReasoningContent, hasReasoning = &text, true
		case "item_reference":
			return nil, badRequest(param+".type", "item_reference items are not supported: send the item itself, or previous_response_id")
		default:
			return nil, badRequest(param+".type", "input item type %q is not supported (message, function_call, function_call_output, reasoning; hosted tools are not run here)", it.Type)
		}
	}
	return out, nil
}

// itemError says what is wrong with an input item that did not decode,
// naming the field (never Go's type names).
func itemError(param string, err error) *APIError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return badRequest(param+"."+te.Field, "%s.%s must not be a JSON %s", param, te.Field, te.Value)
	}
	return badRequest(param, "%s must be an input item object (a message, function_call, function_call_output or reasoning item)", param)
}

// messageContent converts a Responses content (a string, null, or a list of
// input_text / output_text / refusal parts) into chat content: text parts,
// which the chat path joins as it joins a chat client's.
func messageContent(raw json.RawMessage, param string) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		return raw, nil // a JSON string (the item decoded)
	}
	var parts []struct {
		Type    string  `json:"type"`
		Text    *string `json:"text"`
		Refusal *string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, badRequest(param, "content must be a string or an array of input_text / output_text parts")
	}
	type textPart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	out := make([]textPart, 0, len(parts))
	for k, p := range parts {
		var text *string
		switch p.Type {
		case "input_text", "output_text", "text":
			text = p.Text
		case "refusal":
			text = p.Refusal
		default:
			return nil, badRequest(fmt.Sprintf("%s[%d]", param, k), "content part of type %q is not supported (text only: input_text, output_text)", p.Type)
		}
		if text == nil {
			return nil, badRequest(fmt.Sprintf("%s[%d]", param, k), "a %s part needs its text", p.Type)
		}
		out = append(out, textPart{Type: "text", Text: *text})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, badRequest(param, "content: %v", err)
	}
	return b, nil
}

// reasoningText is a reasoning item's text: its reasoning_text content,
// else its summary. The proxy's own items carry the model's thinking as
// reasoning_text; either way it does not change which state a request
// continues (reasoning is not part of the match), only what drift renders.
func reasoningText(it inputItem, param string) (string, error) {
	if isSet(it.Content) {
		var parts []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(it.Content, &parts); err != nil {
			return "", badRequest(param+".content", "reasoning content must be an array of reasoning_text parts")
		}
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String(), nil
	}
	texts := make([]string, len(it.Summary))
	for i, s := range it.Summary {
		texts[i] = s.Text
	}
	return strings.Join(texts, "\n\n"), nil
}

// chatTools converts Responses function tools ({"type": "function", "name",
// "description", "parameters", "strict"}) into chat tools ({"type":
// "function", "function": {…}}): the function object is the client's tool
// without "type", its fields in the client's order, so it renders as the
// same function sent to chat completions does.
func chatTools(tools []json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(tools))
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		fields, err := objectFields(t)
		if err != nil {
			return nil, badRequest(param, "tool is not a JSON object: %v", err)
		}
		var typ, name string
		for _, f := range fields {
			switch f.key {
			case "type":
				_ = json.Unmarshal(f.val, &typ)
			case "name":
				_ = json.Unmarshal(f.val, &name)
			}
		}
		if typ != "function" {
			return nil, badRequest(param+".type", "tool type %q is not supported: only function tools (hosted tools such as web_search run at OpenAI, not here)", typ)
		}
		if name == "" {
			return nil, badRequest(param+".name", "a function tool needs a name")
		}
		var b bytes.Buffer
		b.WriteString(`{"type":"function","function":{`)
		n := 0
		for _, f := range fields {
			if f.key == "type" {
				continue
			}
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			b.Write(jsonText(f.key))
			b.WriteByte(':')
			b.Write(f.val)
		}
		b.WriteString("}}")
		out = append(out, b.Bytes())
	}
	return out, nil
}

type field struct {
	key string
	val json.RawMessage
}

// objectFields lists a JSON object's members in order.
func objectFields(raw json.RawMessage) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var out []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string) // object keys are strings
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		out = append(out, field{key: key, val: val})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the object")
	}
	return out, nil
}

// chatToolChoice converts a Responses tool_choice — "auto", "none",
// "required" or {"type": "function", "name"} — into chat's. As for chat,
// it is checked, not enforced. A named function must be one of tools.
func chatToolChoice(raw json.RawMessage, tools []json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || raw[0] == '"' {
		return raw, nil // strings are checked as chat's
	}
	var v struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Type != "function" || v.Name == "" {
		return nil, badRequest("tool_choice", `tool_choice must be "auto", "none", "required" or {"type": "function", "name": …} (allowed_tools and hosted tools are not supported)`)
	}
	found := false
	for _, t := range tools {
		var tv struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &tv) == nil && tv.Name == v.Name {
			found = true
		}
	}
	if !found {
		return nil, badRequest("tool_choice", "tool_choice names the function %q, which is not in tools", v.Name)
	}
	b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": v.Name}})
	return b, nil
}

// responsesParam renames a chat parameter in an error for a Responses
// client: "messages…" is its input, max_completion_tokens its
// max_output_tokens.
func responsesParam(err error) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return err
	}
	out := *ae
	switch {
	case strings.HasPrefix(out.Param, "messages"):
		out.Param = "input"
	case out.Param == "max_completion_tokens":
		out.Param = "max_output_tokens"
	}
	return &out
}

// responses serves POST /v1/responses.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	key, meta, perr := parseCredentials(r)
	if perr != nil {
		return perr
	}
	body, err := readBody(r, s.cfg)
	if err != nil {
		return err
	}
	rc, err := parseResponses(body)
	if err != nil {
		return err
	}
	if s.cfg.Auth.Disabled {
		key = ""
	}
	prevID := ""
	if rc.req.PreviousResponseID != nil {
		prevID = *rc.req.PreviousResponseID
	}
	if len(rc.items) == 0 {
		return badRequest("input", "input must not be empty: a string, or a list of items (after previous_response_id, the new ones)")
	}
	// Without previous_response_id the request is validated before its
	// session is opened, as chat requests are; with it, the session holds
	// the conversation to validate.
	var sess *session
	var prev []chattemplate.Message
	if prevID != "" {
		if sess, prev, err = s.previousResponse(meta, key, prevID); err != nil {
			return err
		}
		defer s.letGo(sess)
	}
	c, err := checkCall(&call{req: rc.chatRequest(prev)}, s.cfg, &s.intern)
	if err != nil {
		return responsesParam(err)
	}
	if err := s.checkTextLength(c.msgs); err != nil {
		return responsesParam(err)
	}
	if sess == nil {
		if sess, err = s.acquire(meta, key); err != nil {
			return err
		}
		defer s.letGo(sess) // after release (defers run last first)
	}
	prompt, err := s.prepare(sess, c)
	if err != nil {
		return responsesParam(err)
	}
	release := releaseOnce(sess)
	defer release()
	ids := prompt.hist.Prompt()
	budget, err := s.newTokenBudget(c, len(ids), "input")
	if err != nil {
		return err
	}
	genStart := time.Now()
	gens, err := s.generate(r.Context(), sess, c, ids, budget)
	genTime := time.Since(genStart)
	if err != nil {
		return policyError(err)
	}
	choices, err := s.record(sess, c, prompt, gens)
	if err != nil {
		return err
	}
	ch := choices[0]
	id := "resp_" + randomHex(24)
	if rc.store {
		// The conversation after this response, without the instructions
		// (OpenAI does not carry them over a previous_response_id either).
		first := 0
		if rc.instructions() != "" {
			first = 1
		}
		out := ch.message
		out.ReasoningContent = ch.reasoning
		conv := append(slices.Clip(c.msgs[first:]), out)
		sess.mu.Lock()
		sess.responses.put(id, conv)
		sess.mu.Unlock()
	}
	release()
	s.m.Generation.Observe(genTime.Seconds())
	s.m.Overhead.Observe((time.Since(start) - genTime).Seconds())
	resp := s.responseObject(rc, id, ch, len(ids))
	if rc.req.Stream {
		return writeResponseStream(w, resp)
	}
	writeJSON(w, http.StatusOK, resp.body(resp.output, "final"))
	return nil
}

// previousResponse finds the session holding previous_response_id (the one
// the request names; it must be open already) and the stored conversation.
func (s *Server) previousResponse(meta SessionMeta, key, id string) (*session, []chattemplate.Message, error) {
	notFound := &APIError{Status: http.StatusBadRequest, Type: errInvalidRequest, Code: "previous_response_not_found", Param: "previous_response_id",
		Message: fmt.Sprintf("Previous response with id %q not found (responses are kept in their session, the last %d of each, unless store is false).", id, storedResponses)}
	if meta.ID == "" {
		_, err := s.acquire(meta, key) // the missing-session error
		return nil, nil, err
	}
	s.mu.Lock()
	_, open := s.sessions[meta.ID]
	e, ended := s.ended[meta.ID]
	s.mu.Unlock()
	switch {
	case !open && ended:
		return nil, nil, endedError(meta.ID, e) // as a call to it is answered
	case !open:
		return nil, nil, notFound // and a dangling reference opens no session
	}
	sess, err := s.acquire(meta, key)
	if err != nil {
		return nil, nil, err
	}
	sess.mu.Lock()
	conv, ok := sess.responses.get(id)
	sess.mu.Unlock()
	if !ok {
		s.letGo(sess)
		return nil, nil, notFound
	}
	return sess, conv, nil
}

// responseObj is a response being answered: the object's fields and its
// output items.
type responseObj struct {
	fields map[string]any
	output []map[string]any
	status string
}

// body is the response object with the given output; phase "created" is
// the in-progress object the stream starts with (no output, no usage).
func (r *responseObj) body(output []map[string]any, phase string) map[string]any {
	out := make(map[string]any, len(r.fields)+3)
	for k, v := range r.fields {
		out[k] = v
	}
	out["output"] = output
	if phase == "created" {
		out["status"] = "in_progress"
		out["usage"] = nil
		out["incomplete_details"] = nil
	}
	return out
}

// responseObject builds the response to a recorded choice: a reasoning item
// with the thinking (as reasoning_text, as vLLM's Responses API gives an
// open model's thinking), a message item with the text, a function_call
// item per tool call (call_id is the id the conversation records).
func (s *Server) responseObject(rc *responsesCall, id string, ch *choice, promptTokens int) *responseObj {
	req := &rc.req
	status := "completed"
	var incomplete any
	if ch.finish == "length" {
		status = "incomplete"
		incomplete = map[string]string{"reason": "max_output_tokens"}
	}
	var output []map[string]any
	if ch.reasoning != nil && *ch.reasoning != "" {
		output = append(output, map[string]any{"id": "rs_" + randomHex(24), "type": "reasoning", "summary": []any{},
			"content": []any{map[string]any{"type": "reasoning_text", "text": *ch.reasoning}}})
	}
	if ch.message.Content != "" || len(ch.message.ToolCalls) == 0 {
		output = append(output, map[string]any{"id": "msg_" + randomHex(24), "type": "message", "status": status, "role": "assistant",
			"content": []any{outputTextPart(ch.message.Content)}})
	}
	for _, tc := range ch.message.ToolCalls {
		output = append(output, map[string]any{"id": "fc_" + randomHex(24), "type": "function_call", "status": "completed",
			"call_id": tc.ID, "name": tc.Function.Name, "arguments": string(tc.Function.Arguments)})
	}
	model := req.Model
	if model == "" {
		model = s.cfg.Model
	}
	tools := req.Tools
	if tools == nil {
		tools = []json.RawMessage{}
	}
	var toolChoice any = "auto"
	if isSet(req.ToolChoice) {
		toolChoice = req.ToolChoice
	}
	parallel := req.ParallelToolCalls == nil || *req.ParallelToolCalls
	var metadata any = map[string]any{}
	if isSet(req.Metadata) {
		metadata = req.Metadata
	}
	var text any = map[string]any{"format": map[string]string{"type": "text"}}
	if isSet(req.Text) {
		text = req.Text
	}
	completion := len(ch.ids)
	fields := map[string]any{
		"id": id, "object": "response", "created_at": time.Now().Unix(), "status": status, "background": false,
		"error": nil, "incomplete_details": incomplete, "instructions": req.Instructions, "max_output_tokens": req.MaxOutputTokens,
		"model": model, "parallel_tool_calls": parallel, "previous_response_id": req.PreviousResponseID,
		"reasoning": map[string]any{"effort": nil, "summary": nil}, "store": rc.store, "temperature": valueOr(req.Temperature, 1),
		"text": text, "tool_choice": toolChoice, "tools": tools, "top_p": valueOr(req.TopP, 1), "truncation": "disabled",
		"user": nil, "metadata": metadata,
		"usage": map[string]any{"input_tokens": promptTokens, "input_tokens_details": map[string]int{"cached_tokens": 0},
			"output_tokens": completion, "output_tokens_details": map[string]int{"reasoning_tokens": 0},
			"total_tokens": promptTokens + completion},
	}
	return &responseObj{fields: fields, output: output, status: status}
}

func valueOr(p *float64, d float64) float64 {
	if p == nil {
		return d
	}
	return *p
}

func outputTextPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// writeResponseStream answers as server-sent events with the Responses
// API's shapes, each event numbered by sequence_number: response.created
// and response.in_progress (the object in progress, no output); per output
// item response.output_item.added (the item empty), for a message
// response.content_part.added, response.output_text.delta (pieces of the
// text), response.output_text.done and response.content_part.done, for a
// reasoning item the same with reasoning_text, for a function call
// response.function_call_arguments.delta and .done; then
// response.output_item.done (the whole item); last response.completed (or
// response.incomplete when the budget cut the answer) with the whole
// response. As for chat, the events are sent once the generation is
// complete.
func writeResponseStream(w http.ResponseWriter, resp *responseObj) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	seq := 0
	send := func(typ string, ev map[string]any) error {
		ev["type"], ev["sequence_number"] = typ, seq
		seq++
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		buf.WriteString("event: " + typ + "\ndata: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	var events []func() error
	ev := func(typ string, fields map[string]any) {
		events = append(events, func() error { return send(typ, fields) })
	}
	ev("response.created", map[string]any{"response": resp.body([]map[string]any{}, "created")})
	ev("response.in_progress", map[string]any{"response": resp.body([]map[string]any{}, "created")})
	for i, item := range resp.output {
		id := item["id"]
		at := func(m map[string]any) map[string]any { m["item_id"], m["output_index"] = id, i; return m }
		switch item["type"] {
		case "message", "reasoning":
			added := map[string]any{}
			for k, v := range item {
				added[k] = v
			}
			added["content"] = []any{}
			partType, deltaType, doneType := "output_text", "response.output_text.delta", "response.output_text.done"
			text := ""
			if item["type"] == "message" {
				added["status"] = "in_progress"
				text = item["content"].([]any)[0].(map[string]any)["text"].(string)
			} else {
				partType, deltaType, doneType = "reasoning_text", "response.reasoning_text.delta", "response.reasoning_text.done"
				text = item["content"].([]any)[0].(map[string]any)["text"].(string)
			}
			part := func(t string) map[string]any {
				if partType == "output_text" {
					return outputTextPart(t)
				}
				return map[string]any{"type": partType, "text": t}
			}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			ev("response.content_part.added", at(map[string]any{"content_index": 0, "part": part("")}))
			for _, p := range pieces(text) {
				d := at(map[string]any{"content_index": 0, "delta": p})
				if partType == "output_text" {
					d["logprobs"] = []any{}
				}
				ev(deltaType, d)
			}
			done := at(map[string]any{"content_index": 0, "text": text})
			if partType == "output_text" {
				done["logprobs"] = []any{}
			}
			ev(doneType, done)
			ev("response.content_part.done", at(map[string]any{"content_index": 0, "part": part(text)}))
		case "function_call":
			added := map[string]any{}
			for k, v := range item {
				added[k] = v
			}
			added["arguments"], added["status"] = "", "in_progress"
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			args := item["arguments"].(string)
			for _, p := range pieces(args) {
				ev("response.function_call_arguments.delta", at(map[string]any{"delta": p}))
			}
			ev("response.function_call_arguments.done", at(map[string]any{"name": item["name"], "arguments": args}))
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	final := "response.completed"
	if resp.status == "incomplete" {
		final = "response.incomplete"
	}
	ev(final, map[string]any{"response": resp.body(resp.output, "final")})
	for _, e := range events {
		if err := e(); err != nil {
			return nil // the client went away; the call is recorded
		}
	}
	return nil
}
