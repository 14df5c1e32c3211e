package chattemplate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"tau2rl/lib/inference/tokenizer"
)

// incrementalHeadroom is the capacity, in tokens, reserved beyond the first
// prompt of a history started from a Prefix, so that an episode's
// completions and turns grow the slice in place instead of re-copying the
// (typically ~7k-token) prompt at every doubling.
const incrementalHeadroom = 4096

// Prefix is the tokenized start of a conversation that many episodes share:
// the system turn (with its "# Tools" block) and any fixed messages after it
// (the agent's greeting), rendered without a generation prompt, so that the
// text ends with "<|im_end|>\n". Tokenizing it once and starting every
// episode's Incremental history from it (NewIncremental) saves tokenizing
// τ²'s ~7k-token system prompt per episode.
//
// A Prefix is immutable and safe for concurrent use; its ids are copied,
// never modified, by the histories started from it.
type Prefix struct {
	tmpl base // tok, opts (with the generation prompt), imEnd, stops, msgs: the initial messages
	ids  []int32
}

// NewPrefix renders initial with the template (opts.AddGenerationPrompt is
// ignored: the prefix never ends with a generation prompt) and tokenizes it.
// The rendering must end with a closed turn, "<|im_end|>\n"; an empty
// conversation without tools renders nothing and is refused.
func NewPrefix(tok *tokenizer.Tokenizer, initial []Message, opts Options) (*Prefix, error) {
	opts.AddGenerationPrompt = false
	text, err := Render(initial, opts)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(text, IMEnd+"\n") {
		return nil, fmt.Errorf("chattemplate: prefix of %d messages does not end with a closed turn (%s)", len(initial), IMEnd)
	}
	opts.AddGenerationPrompt = true
	b, err := newBase(tok, opts)
	if err != nil {
		return nil, err
	}
	b.msgs = slices.Clone(initial)
	return &Prefix{tmpl: *b, ids: tok.Encode(text)}, nil
}

// IDs returns the prefix's token ids. The slice must not be modified.
func (p *Prefix) IDs() []int32 { return p.ids[:len(p.ids):len(p.ids)] }

// NewIncremental starts a token-exact Incremental history from a cached
// prefix: its first prompt is the prefix's ids followed by first (the
// episode's own opening turns, possibly none) rendered as AddMessages
// renders turns, and the generation prompt. The ids equal those of
// New(ModeIncremental, tok, initial+first, opts) for the same conversation:
// the prefix ends right before an <|im_start|> added token, where the
// tokenizer splits the text before BPE, so tokenizing the two parts
// separately gives the ids of the whole (prefix_test.go checks it).
//
// A leading tool result in first is refused when the prefix ends with one:
// the template would group the two into one user turn, which the closed
// prefix can no longer do.
func NewIncremental(p *Prefix, first []Message) (*Incremental, error) {
	if p == nil {
		return nil, fmt.Errorf("chattemplate: nil prefix")
	}
	for i, m := range first {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return nil, fmt.Errorf("chattemplate: first message %d: role %q is not rendered by the Qwen3 template", i, m.Role)
		}
	}
	if n := len(p.tmpl.msgs); n > 0 && len(first) > 0 && p.tmpl.msgs[n-1].Role == RoleTool && first[0].Role == RoleTool {
		return nil, fmt.Errorf("chattemplate: first message is a tool result following the prefix's tool result; the template would group them")
	}
	delta, err := RenderDelta(first, p.tmpl.opts)
	if err != nil {
		return nil, err
	}
	b := p.tmpl
	b.msgs = make([]Message, 0, len(p.tmpl.msgs)+len(first)+16)
	b.msgs = append(append(b.msgs, p.tmpl.msgs...), first...)
	ids := make([]int32, len(p.ids), len(p.ids)+incrementalHeadroom)
	copy(ids, p.ids)
	ids = b.tok.AppendEncode(ids, delta[1:]) // without the "\n" that follows <|im_end|>: the prefix has it
	return &Incremental{base: &b, ids: ids}, nil
}

// PrefixCache holds the Prefixes of distinct conversation starts (system
// prompt, tools, fixed opening messages, template options), so that the
// sessions or episodes that share one tokenize it once — also when a
// thousand of them start at the same moment: one caller tokenizes, the
// others wait for it. It is safe for concurrent use. Max bounds the number
// of entries (0: unbounded); once full, new starts are tokenized without
// being cached, so clients that send ever-new system prompts cannot grow it
// without bound.
type PrefixCache struct {
	Max int

	m sync.Map // key string -> *prefixEntry
	n atomic.Int64
}

type prefixEntry struct {
	once sync.Once
	p    *Prefix
	err  error
}

// Get returns the cached Prefix of initial under opts, building it on the
// first request (see NewPrefix). A failed build is not cached.
func (c *PrefixCache) Get(tok *tokenizer.Tokenizer, initial []Message, opts Options) (*Prefix, error) {
	key, err := prefixKey(initial, opts)
	if err != nil {
		return nil, err
	}
	v, ok := c.m.Load(key)
	if !ok {
		if c.Max > 0 && c.n.Load() >= int64(c.Max) {
			return NewPrefix(tok, initial, opts)
		}
		var loaded bool
		if v, loaded = c.m.LoadOrStore(key, &prefixEntry{}); !loaded {
			c.n.Add(1)
		}
	}
	e := v.(*prefixEntry)
	e.once.Do(func() { e.p, e.err = NewPrefix(tok, initial, opts) })
	if e.err != nil {
		if c.m.CompareAndDelete(key, e) {
			c.n.Add(-1)
		}
		return nil, e.err
	}
	return e.p, nil
}

// Len is the number of cached prefixes.
func (c *PrefixCache) Len() int { return int(c.n.Load()) }

// prefixKey identifies a conversation start: everything Render reads, each
// field length-prefixed so that no two starts share a key. (Not JSON: a
// τ² system prompt is ~25 KB, and sessions that start together all build
// the key.)
func prefixKey(initial []Message, opts Options) (string, error) {
	n := 16
	for _, t := range opts.Tools {
		n += len(t) + 8
	}
	for _, m := range initial {
		n += len(m.Role) + len(m.Content) + len(m.ToolCallID) + 32
		if m.ReasoningContent != nil {
			n += len(*m.ReasoningContent)
		}
		for _, tc := range m.ToolCalls {
			n += len(tc.ID) + len(tc.Type) + len(tc.Function.Name) + len(tc.Function.Arguments) + 32
		}
	}
	b := make([]byte, 0, n)
	field := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(append(b, ':'), s...)
	}
	switch {
	case opts.EnableThinking == nil:
		b = append(b, 'u')
	case *opts.EnableThinking:
		b = append(b, 't')
	default:
		b = append(b, 'f')
	}
	b = strconv.AppendInt(b, int64(len(opts.Tools)), 10)
	for _, t := range opts.Tools {
		field(string(t))
	}
	for _, m := range initial {
		b = append(b, 'm')
		field(m.Role)
		field(m.Content)
		field(m.ToolCallID)
		if m.ReasoningContent != nil {
			b = append(b, 'r')
			field(*m.ReasoningContent)
		}
		b = strconv.AppendInt(b, int64(len(m.ToolCalls)), 10)
		for _, tc := range m.ToolCalls {
			field(tc.ID)
			field(tc.Type)
			field(tc.Function.Name)
			field(string(tc.Function.Arguments))
		}
	}
	return string(b), nil
}
