package chattemplate

import (
	"fmt"
	"slices"
	"strings"

	"tau2rl/lib/inference/tokenizer"
)

// Mode selects how the prompts of an episode's successive policy calls are
// built. See the package documentation.
type Mode string

const (
	// ModeIncremental appends each completion's tokens as generated and each
	// new turn as a rendered delta: prompts only ever grow (the default).
	ModeIncremental Mode = "incremental"
	// ModeRerender re-renders the whole conversation with the template for
	// every call, as AReaL's proxy does with chat_template_type "hf".
	ModeRerender Mode = "rerender"
)

// ParseMode validates a mode name from configuration ("" means incremental).
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeIncremental:
		return ModeIncremental, nil
	case ModeRerender:
		return ModeRerender, nil
	}
	return "", fmt.Errorf("chattemplate: unknown history mode %q (want %q or %q)", s, ModeIncremental, ModeRerender)
}

// History is the policy's view of one episode: the prompt for its next call,
// its completions, and the turns in between.
//
// The calls alternate: Prompt → AddCompletion → AddMessages → Prompt → … .
type History interface {
	// Prompt returns the token ids of the next call's prompt, ending with the
	// generation prompt. The slice must not be modified.
	Prompt() []int32
	// AddCompletion records the generated ids exactly as the server returned
	// them (including the stop token) and returns the parsed completion.
	// The ids are kept even when the completion is invalid.
	AddCompletion(ids []int32) (Completion, error)
	// AddMessages appends the turns that follow a completion (tool results,
	// the user's reply) and prepares the next prompt.
	AddMessages(msgs ...Message) error
	// Messages is the conversation so far, completions as parsed messages.
	Messages() []Message
}

// New starts a history for mode from the initial messages (system prompt,
// greeting, first user message), rendered with the template and its
// generation prompt.
func New(mode Mode, tok *tokenizer.Tokenizer, initial []Message, opts Options) (History, error) {
	opts.AddGenerationPrompt = true
	b, err := newBase(tok, opts)
	if err != nil {
		return nil, err
	}
	b.msgs = slices.Clone(initial)
	switch mode {
	case ModeIncremental, "", ModeRerender:
	default:
		return nil, fmt.Errorf("chattemplate: unknown history mode %q", mode)
	}
	text, err := Render(initial, opts)
	if err != nil {
		return nil, err
	}
	if mode == ModeRerender {
		return &Rerender{base: b, ids: tok.Encode(text)}, nil
	}
	return &Incremental{base: b, ids: tok.Encode(text)}, nil
}

// newBase looks up the special tokens a history needs in tok. opts must
// already have AddGenerationPrompt set.
func newBase(tok *tokenizer.Tokenizer, opts Options) (*base, error) {
	if tok == nil {
		return nil, fmt.Errorf("chattemplate: nil tokenizer")
	}
	b := &base{tok: tok, opts: opts}
	imEnd, ok := tok.AddedTokenID(IMEnd)
	if !ok {
		return nil, fmt.Errorf("chattemplate: tokenizer has no %s token", IMEnd)
	}
	b.imEnd = imEnd
	for _, s := range []string{IMEnd, "<|endoftext|>"} {
		if id, ok := tok.AddedTokenID(s); ok {
			b.stops = append(b.stops, id)
		}
	}
	return b, nil
}

type base struct {
	tok     *tokenizer.Tokenizer
	opts    Options
	msgs    []Message
	imEnd   int32
	stops   []int32 // ids that end a completion: <|im_end|>, <|endoftext|>
	pending bool    // a completion was added and no messages since
}

func (b *base) Messages() []Message { return slices.Clone(b.msgs) }

// parse decodes the completion without its final stop token and parses it.
func (b *base) parse(ids []int32) (Completion, error) {
	body := ids
	if n := len(body); n > 0 && slices.Contains(b.stops, body[n-1]) {
		body = body[:n-1]
	}
	text, err := b.tok.Decode(body)
	if err != nil {
		return Completion{}, fmt.Errorf("chattemplate: completion: %w", err)
	}
	return ParseCompletion(text), nil
}

func (b *base) addCompletion(ids []int32) (Completion, error) {
	if b.pending {
		return Completion{}, fmt.Errorf("%w: AddCompletion twice without AddMessages", ErrOrder)
	}
	c, err := b.parse(ids)
	if err != nil {
		return Completion{}, err
	}
	b.msgs = append(b.msgs, c.Message())
	b.pending = true
	return c, nil
}

func (b *base) checkMessages(msgs []Message) error {
	if !b.pending {
		return fmt.Errorf("%w: AddMessages without a completion before it", ErrOrder)
	}
	if len(msgs) == 0 {
		return fmt.Errorf("chattemplate: AddMessages with no messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return fmt.Errorf("chattemplate: message %d: role %q is not rendered by the Qwen3 template", i, m.Role)
		}
	}
	return nil
}

// Incremental is the token-exact, append-only history (ModeIncremental).
type Incremental struct {
	*base
	ids []int32
}

// Prompt implements History.
func (h *Incremental) Prompt() []int32 { return h.ids[:len(h.ids):len(h.ids)] }

// AddCompletion implements History: the ids are appended verbatim, followed
// by <|im_end|> when they do not already end with it (a completion cut by
// max_new_tokens, or ended by <|endoftext|>), so the assistant turn is closed
// as the template would close it.
func (h *Incremental) AddCompletion(ids []int32) (Completion, error) {
	c, err := h.addCompletion(ids)
	if err != nil {
		return c, err
	}
	h.ids = append(h.ids, ids...)
	if len(ids) == 0 || ids[len(ids)-1] != h.imEnd {
		h.ids = append(h.ids, h.imEnd)
	}
	return c, nil
}

// AddMessages implements History: the turns are rendered as the template
// renders them after an assistant turn ("\n<|im_start|>user\n…<|im_end|>\n"
// for each, consecutive tool results grouped into one user turn, assistant
// messages without thinking), followed by the generation prompt, tokenized
// on their own and appended. The delta starts right after <|im_end|>, an
// added token, so tokenizing it separately gives the same ids as tokenizing
// the whole text.
func (h *Incremental) AddMessages(msgs ...Message) error {
	if err := h.checkMessages(msgs); err != nil {
		return err
	}
	delta, err := RenderDelta(msgs, h.opts)
	if err != nil {
		return err
	}
	h.ids = h.tok.AppendEncode(h.ids, delta)
	h.msgs = append(h.msgs, msgs...)
	h.pending = false
	return nil
}

// RenderDelta renders turns that follow a closed assistant turn: the "\n"
// after its <|im_end|>, each message as the Qwen3 template renders it there,
// and the generation prompt.
func RenderDelta(msgs []Message, opts Options) (string, error) {
	var b strings.Builder
	b.WriteByte('\n')
	for i := range msgs {
		if err := renderMessage(&b, msgs, i, false, false); err != nil {
			return "", err
		}
	}
	b.WriteString(opts.GenerationPrompt())
	return b.String(), nil
}

// Rerender re-renders the conversation with the template for every prompt
// (ModeRerender): earlier thinking is dropped as Qwen3's template drops it,
// and earlier completions are re-tokenized from their parsed messages.
type Rerender struct {
	*base
	ids []int32
}

// Prompt implements History.
func (h *Rerender) Prompt() []int32 { return h.ids[:len(h.ids):len(h.ids)] }

// AddCompletion implements History.
func (h *Rerender) AddCompletion(ids []int32) (Completion, error) {
	return h.addCompletion(ids)
}

// AddMessages implements History.
func (h *Rerender) AddMessages(msgs ...Message) error {
	if err := h.checkMessages(msgs); err != nil {
		return err
	}
	next := append(slices.Clone(h.msgs), msgs...)
	text, err := Render(next, h.opts)
	if err != nil {
		return err
	}
	h.msgs, h.ids, h.pending = next, h.tok.Encode(text), false
	return nil
}

// Fork returns an independent copy of h: appending to either never changes
// the other. The token ids are shared until one of them grows (the copy's
// slice has no spare capacity, so its first append reallocates), so forking
// a long history is cheap. The capture proxy forks a prompt's history once
// per returned choice, and a choice's history once per continuation a
// client sends.
func (h *Incremental) Fork() *Incremental {
	b := *h.base
	b.msgs = slices.Clip(b.msgs)
	return &Incremental{base: &b, ids: slices.Clip(h.ids)}
}

// ForkShared is Fork without the copy-on-grow guarantee: the copy shares
// h's spare capacity, so growing it writes past h's end, where h does not
// look. It saves a copy of the whole history per turn for a caller that
// extends one line of forks, and is safe only if at most one of h and its
// shared forks ever grows (the capture proxy tracks which state holds the
// tip of each backing array).
func (h *Incremental) ForkShared() *Incremental {
	b := *h.base
	b.msgs = slices.Clip(b.msgs)
	return &Incremental{base: &b, ids: h.ids}
}

// Pending reports whether a completion was added and no messages since
// (the next call must be AddMessages).
func (h *Incremental) Pending() bool { return h.pending }
