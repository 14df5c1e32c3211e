package batch

import (
	"fmt"

	"tau2rl/schemas"
	"tau2rl/trainer/prefixtree"
)

// Demonstration is what supervised training takes from one trajectory: its sequences, laid out
// exactly as Build lays out RL sequences (per call, or per token-exact conversation; full prompt ‖
// completion; the completion's trained tokens as loss tokens; a token at position 0 never
// scored), so SFT and GRPO train the same tokens in the same contexts and pack the same way.
type Demonstration struct {
	Seqs []prefixtree.Sequence
	// Tokens is Σ len(Seqs[i].Tokens) (before packing); LossTokens the loss tokens.
	Tokens, LossTokens int64
	// Oversize counts calls left out because their sequence exceeds maxTokens.
	Oversize int
}

// Demonstrate lays out t's sequences for supervised training under mode (ModeCall or
// ModeConversation). Behaviour log-probs are not needed (the objective is the likelihood of the
// tokens), so calls with missing or invalid ones are kept. A sequence longer than maxTokens (> 0)
// is left out and counted.
func Demonstrate(t *schemas.Trajectory, mode string, maxTokens int) (Demonstration, error) {
	var d Demonstration
	if mode != ModeCall && mode != ModeConversation {
		return d, fmt.Errorf("batch: sequence_mode %q: want %q or %q", mode, ModeCall, ModeConversation)
	}
	prompts, err := t.FullPrompts()
	if err != nil {
		return d, fmt.Errorf("batch: trajectory %s: %w", t.ID, err)
	}
	for _, ch := range chains(t, prompts, mode, maxTokens) {
		last := ch[1] - 1
		lc := &t.Calls[last]
		n := len(prompts[last]) + len(lc.CompletionTokens)
		if maxTokens > 0 && n > maxTokens {
			d.Oversize++
			continue
		}
		tokens := make([]int32, 0, n)
		tokens = append(append(tokens, prompts[last]...), lc.CompletionTokens...)
		mask := make([]bool, n)
		trained := 0
		for k := ch[0]; k <= last; k++ {
			c := &t.Calls[k]
			start := len(prompts[k])
			for j := range c.CompletionTokens {
				if pos := start + j; pos > 0 && c.Trained(j) {
					mask[pos] = true
					trained++
				}
			}
		}
		if trained == 0 {
			continue
		}
		d.Seqs = append(d.Seqs, prefixtree.Sequence{Tokens: tokens, Loss: mask})
		d.Tokens += int64(n)
		d.LossTokens += int64(trained)
	}
	return d, nil
}
