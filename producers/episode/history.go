package episode

import (
	"fmt"
	"slices"
	"strings"

	"tau2rl/producers/chattemplate"
	"tau2rl/producers/tokenizer"
)

// incremental is chattemplate's token-exact incremental history (same
// rules: completions appended verbatim and closed with <|im_end|>, later
// turns rendered as deltas and tokenized on their own) started from a
// cached, already tokenized prefix. The prefix is the rendering of the
// system turn and the initial messages, which ends with "<|im_end|>\n";
// the first turns follow as the delta without its leading newline. Because
// the text around the boundary is split at added tokens before BPE, the ids
// equal those of chattemplate.New on the whole conversation
// (history_test.go checks it).
type incremental struct {
	tok     *tokenizer.Tokenizer
	opts    chattemplate.Options
	ids     []int32
	msgs    []chattemplate.Message
	imEnd   int32
	stops   []int32
	pending bool
}

var _ chattemplate.History = (*incremental)(nil)

func newIncremental(tok *tokenizer.Tokenizer, prefix []int32, initial, first []chattemplate.Message, opts chattemplate.Options) (*incremental, error) {
	opts.AddGenerationPrompt = true
	imEnd, ok := tok.AddedTokenID(chattemplate.IMEnd)
	if !ok {
		return nil, fmt.Errorf("tokenizer has no %s token", chattemplate.IMEnd)
	}
	h := &incremental{tok: tok, opts: opts, imEnd: imEnd, msgs: slices.Concat(initial, first)}
	for _, s := range []string{chattemplate.IMEnd, "<|endoftext|>"} {
		if id, ok := tok.AddedTokenID(s); ok {
			h.stops = append(h.stops, id)
		}
	}
	delta, err := chattemplate.RenderDelta(first, opts)
	if err != nil {
		return nil, err
	}
	h.ids = make([]int32, len(prefix), len(prefix)+4096)
	copy(h.ids, prefix)
	h.ids = tok.AppendEncode(h.ids, strings.TrimPrefix(delta, "\n"))
	return h, nil
}

func (h *incremental) Prompt() []int32 { return h.ids[:len(h.ids):len(h.ids)] }

func (h *incremental) Messages() []chattemplate.Message { return slices.Clone(h.msgs) }

func (h *incremental) AddCompletion(ids []int32) (chattemplate.Completion, error) {
	if h.pending {
		return chattemplate.Completion{}, fmt.Errorf("%w: AddCompletion twice without AddMessages", chattemplate.ErrOrder)
	}
	body := ids
	if n := len(body); n > 0 && slices.Contains(h.stops, body[n-1]) {
		body = body[:n-1]
	}
	text, err := h.tok.Decode(body)
	if err != nil {
		return chattemplate.Completion{}, fmt.Errorf("completion: %w", err)
	}
	c := chattemplate.ParseCompletion(text)
	h.msgs = append(h.msgs, c.Message())
	h.ids = append(h.ids, ids...)
	if len(ids) == 0 || ids[len(ids)-1] != h.imEnd {
		h.ids = append(h.ids, h.imEnd)
	}
	h.pending = true
	return c, nil
}

func (h *incremental) AddMessages(msgs ...chattemplate.Message) error {
	if !h.pending {
		return fmt.Errorf("%w: AddMessages without a completion before it", chattemplate.ErrOrder)
	}
	if len(msgs) == 0 {
		return fmt.Errorf("AddMessages with no messages")
	}
	delta, err := chattemplate.RenderDelta(msgs, h.opts)
	if err != nil {
		return err
	}
	h.ids = h.tok.AppendEncode(h.ids, delta)
	h.msgs = append(h.msgs, msgs...)
	h.pending = false
	return nil
}
