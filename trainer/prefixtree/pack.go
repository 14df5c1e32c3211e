package prefixtree

import (
	"fmt"
)

// Sequence is one sequence to pack: one policy LLM call (full prompt ‖ completion) or one whole
// conversation when its history is token-exact.
type Sequence struct {
	// Tokens are the token ids, each ≥ 0.
	Tokens []int32
	// Loss marks the tokens that carry loss (the completion tokens the policy generated). nil means
	// none. When set it has one entry per token, and Loss[0] is false: the first token of a
	// sequence has no context, so the model never scores it.
	Loss []bool
}

// Config sets the micro-batch budget.
type Config struct {
	// MaxTokensPerMB is the most tokens (tree nodes) in one micro-batch, AReaL's
	// mb_spec.max_tokens_per_mb. Default 24576 (AReaL's τ² 1.7B config). Every sequence must fit.
	MaxTokensPerMB int `yaml:"max_tokens_per_mb"`
	// MBOverheadTokens is what one more micro-batch costs, in tokens, when the packer weighs
	// splitting against duplicating an ancestor path: a micro-batch boundary is moved to save
	// duplicated tokens only when it saves more than this. Default 128 (one attention block); 0
	// minimises packed tokens alone.
	MBOverheadTokens int `yaml:"mb_overhead_tokens"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{MaxTokensPerMB: 24576, MBOverheadTokens: 128}
}

// Validate reports a config that cannot pack anything.
func (c Config) Validate() error {
	if c.MaxTokensPerMB <= 0 {
		return fmt.Errorf("prefixtree: max_tokens_per_mb must be > 0, got %d", c.MaxTokensPerMB)
	}
	if c.MBOverheadTokens < 0 {
		return fmt.Errorf("prefixtree: mb_overhead_tokens must be ≥ 0, got %d", c.MBOverheadTokens)
	}
	return nil
}

// Packing is the result of Pack: the micro-batches of one training step and its token accounting.
type Packing struct {
	MicroBatches []*MicroBatch
	// OriginalTokens is the sum of the sequence lengths (tokens computed without trees).
	OriginalTokens int64
	// PackedTokens is the sum of the micro-batch sizes (tokens computed with trees, including
	// ancestor paths duplicated across micro-batches).
	PackedTokens int64
	// DistinctTokens is the trie size: the lower bound on PackedTokens.
	DistinctTokens int64
	// LossTokens is the number of (sequence, token) pairs that carry loss.
	LossTokens int64
}

// TokenRatio is AReaL's tree_token_ratio: packed tokens / original tokens (< 1 means savings;
// 0 for an empty packing).
func (p *Packing) TokenRatio() float64 {
	if p == nil || p.OriginalTokens == 0 {
		return 0
	}
	return float64(p.PackedTokens) / float64(p.OriginalTokens)
}

// Pack merges seqs into prefix tries and splits them into micro-batches of at most
// cfg.MaxTokensPerMB tokens. Every sequence lands in exactly one micro-batch; its index in seqs is
// the sequence id used by MicroBatch.Seqs and RefSeq.
//
// The split is optimal among splits of the trie pre-order into contiguous runs: it minimises
// packed tokens + MBOverheadTokens × micro-batches (a dynamic program over the pre-order with a
// sliding-window minimum, O(sequences)). Contiguous runs of the pre-order are exactly "whole trees,
// and a too-large tree cut at subtree boundaries with the ancestor path duplicated".
func Pack(seqs []Sequence, cfg Config) (*Packing, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var t Tree
	for i, s := range seqs {
		if err := checkSequence(i, s, cfg.MaxTokensPerMB); err != nil {
			return nil, err
		}
		if _, err := t.Insert(s.Tokens); err != nil {
			return nil, fmt.Errorf("prefixtree: pack: sequence %d: %w", i, err)
		}
	}
	visits := t.Walk()
	cuts := partition(visits, seqs, int64(cfg.MaxTokensPerMB), int64(cfg.MBOverheadTokens))
	p := &Packing{OriginalTokens: t.OriginalTokens(), DistinctTokens: t.DistinctTokens()}
	begin := 0
	for _, end := range cuts {
		mb := emit(visits[begin:end], seqs)
		p.MicroBatches = append(p.MicroBatches, mb)
		p.PackedTokens += int64(len(mb.Tokens))
		p.LossTokens += int64(len(mb.RefSeq))
		begin = end
	}
	return p, nil
}

func checkSequence(i int, s Sequence, budget int) error {
	if len(s.Tokens) == 0 {
		return fmt.Errorf("prefixtree: pack: sequence %d: %w", i, ErrEmptySequence)
	}
	if len(s.Tokens) > budget {
		return fmt.Errorf("prefixtree: pack: sequence %d has %d tokens: %w (%d)", i, len(s.Tokens), ErrTooLong, budget)
	}
	for j, tok := range s.Tokens {
		if tok < 0 {
			return fmt.Errorf("prefixtree: pack: sequence %d: negative token id %d at %d", i, tok, j)
		}
	}
	if s.Loss != nil {
		if len(s.Loss) != len(s.Tokens) {
			return fmt.Errorf("prefixtree: pack: sequence %d: loss mask has %d entries for %d tokens", i, len(s.Loss), len(s.Tokens))
		}
		if s.Loss[0] {
			return fmt.Errorf("prefixtree: pack: sequence %d: loss on token 0, which has no context to be scored from", i)
		}
	}
	return nil
}

// partition returns the end indices (exclusive) of the contiguous runs of visits that form the
// micro-batches. cost(i..j) = len(s_i) + P[j] − P[i] where P is the prefix sum of
// inc_k = len(s_k) − LCP_k. Because len(s_i) − P[i] is non-increasing in i (LCP_{i+1} ≤ len(s_i)),
// the feasible starts for an end j form a window [lo_j, j] whose lower bound only moves right, so
// dp[j] = overhead + P[j] + min_{i∈window} (dp[i−1] + len(s_i) − P[i]) is a sliding-window
// minimum.
func partition(visits []Visit, seqs []Sequence, budget, overhead int64) []int {
	n := len(visits)
	if n == 0 {
		return nil
	}
	scale := int64(n + 1)
	length := func(k int) int64 { return int64(len(seqs[visits[k-1].Seq].Tokens)) } // 1-based
	P := make([]int64, n+1)
	for k := 1; k <= n; k++ {
		inc := length(k)
		if k > 1 {
			inc -= int64(visits[k-1].LCP)
		}
		P[k] = P[k-1] + inc
	}
	runCost := overhead*scale + 1
	dp := make([]int64, n+1)
	from := make([]int, n+1) // from[j] = start i of the last run ending at j
	g := func(i int) int64 { return dp[i-1] + (length(i)-P[i])*scale }
	deque := make([]int, 0, 64) // candidate starts, g increasing front to back
	lo := 1
	for j := 1; j <= n; j++ {
		gj := g(j)
		for len(deque) > 0 && g(deque[len(deque)-1]) >= gj {
			deque = deque[:len(deque)-1]
		}
		deque = append(deque, j)
		for length(lo)+P[j]-P[lo] > budget {
			lo++
		}
		for deque[0] < lo {
			deque = deque[1:]
		}
		best := deque[0]
		dp[j] = runCost + P[j]*scale + g(best)
		from[j] = best
	}
	var cuts []int
	for j := n; j > 0; j = from[j] - 1 {
		cuts = append(cuts, j)
	}
	for a, b := 0, len(cuts)-1; a < b; a, b = a+1, b-1 {
		cuts[a], cuts[b] = cuts[b], cuts[a]
	}
	return cuts
}
