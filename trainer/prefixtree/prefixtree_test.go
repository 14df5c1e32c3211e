package prefixtree

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"tau2rl/gpu"
)

func seq(toks ...int32) Sequence { return Sequence{Tokens: toks} }

// lossFrom marks tokens [from, len) as loss tokens.
func lossFrom(s Sequence, from int) Sequence {
	s.Loss = make([]bool, len(s.Tokens))
	for i := from; i < len(s.Tokens); i++ {
		s.Loss[i] = true
	}
	return s
}

func TestWalkOrderAndLCP(t *testing.T) {
	var tr Tree
	for _, s := range [][]int32{
		{1, 2, 3, 4},    // 0
		{1, 2, 5},       // 1
		{1, 2, 3, 4, 6}, // 2: extends 0
		{7, 8},          // 3: another root
		{1, 2, 5},       // 4: duplicate of 1
		{1, 2},          // 5: prefix of 0, 1, 2, 4
	} {
		if _, err := tr.Insert(s); err != nil {
			t.Fatal(err)
		}
	}
	got := tr.Walk()
	want := []Visit{{5, 0}, {0, 2}, {2, 4}, {1, 2}, {4, 3}, {3, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("walk = %v, want %v", got, want)
	}
	if tr.DistinctTokens() != 8 { // 1 2 3 4 6 5 7 8
		t.Errorf("distinct = %d, want 8", tr.DistinctTokens())
	}
	if tr.OriginalTokens() != 4+3+5+2+3+2 {
		t.Errorf("original = %d", tr.OriginalTokens())
	}
}

func TestInsertEmpty(t *testing.T) {
	var tr Tree
	if _, err := tr.Insert(nil); !errors.Is(err, ErrEmptySequence) {
		t.Fatalf("err = %v, want ErrEmptySequence", err)
	}
	var nilTree *Tree
	if nilTree.Len() != 0 || nilTree.DistinctTokens() != 0 || nilTree.Walk() != nil {
		t.Fatal("nil tree is not empty")
	}
}

// TestPackGolden checks the exact layout of a small batch against hand-derived arrays.
func TestPackGolden(t *testing.T) {
	seqs := []Sequence{
		lossFrom(seq(1, 2, 3, 4), 2), // 0: loss on 3 4
		lossFrom(seq(1, 2, 5), 2),    // 1: loss on 5
		lossFrom(seq(1, 2, 3, 9), 3), // 2: loss on 9
		seq(7, 8),                    // 3: no loss
	}
	p, err := Pack(seqs, Config{MaxTokensPerMB: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.MicroBatches) != 1 {
		t.Fatalf("%d micro-batches, want 1", len(p.MicroBatches))
	}
	mb := p.MicroBatches[0]
	// Pre-order: 1 2 3 4 | 9 | 5 | 7 8
	want := &MicroBatch{
		MicroBatch: gpu.MicroBatch{
			Tokens:     []int32{1, 2, 3, 4, 9, 5, 7, 8},
			Positions:  []int32{0, 1, 2, 3, 3, 2, 0, 1},
			Parent:     []int32{-1, 0, 1, 2, 2, 1, -1, 6},
			SubtreeEnd: []int32{5, 5, 4, 3, 4, 5, 7, 7},
			Score:      []bool{false, false, true, true, true, true, false, false},
		},
		// loss refs: node 2 (tok 3 of seq 0), node 3 (seq 0 tok 3), node 4 (seq 2 tok 3), node 5 (seq 1 tok 2)
		RefStart: []int32{0, 0, 0, 1, 2, 3, 4, 4, 4},
		RefSeq:   []int32{0, 0, 2, 1},
		RefTok:   []int32{2, 3, 3, 2},
		Seqs:     []int32{0, 2, 1, 3},
		SeqEnd:   []int32{3, 4, 5, 7},
	}
	if !reflect.DeepEqual(mb, want) {
		t.Fatalf("micro-batch\n got %+v\nwant %+v", mb, want)
	}
	if err := mb.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.OriginalTokens != 13 || p.PackedTokens != 8 || p.DistinctTokens != 8 || p.LossTokens != 4 {
		t.Fatalf("accounting %+v", p)
	}
	if r := p.TokenRatio(); r != 8.0/13.0 {
		t.Fatalf("ratio %v", r)
	}
}

func TestPackSplitsDuplicatingAncestors(t *testing.T) {
	// A shared 6-token prefix and three 3-token branches: one tree of 15 tokens. With a budget of
	// 12 the tree must be split; each part carries its own copy of the prefix.
	prefix := []int32{10, 11, 12, 13, 14, 15}
	var seqs []Sequence
	for b := int32(0); b < 3; b++ {
		s := append(slices.Clone(prefix), 100+b, 200+b, 300+b)
		seqs = append(seqs, lossFrom(seq(s...), 6))
	}
	p, err := Pack(seqs, Config{MaxTokensPerMB: 12})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.MicroBatches) != 2 {
		t.Fatalf("%d micro-batches, want 2", len(p.MicroBatches))
	}
	if p.PackedTokens != 12+9 {
		t.Fatalf("packed %d, want 21", p.PackedTokens)
	}
	checkPacking(t, seqs, p, 12)
}

func TestPackErrors(t *testing.T) {
	cases := []struct {
		name string
		seqs []Sequence
		cfg  Config
		want string
	}{
		{"budget", []Sequence{seq(1)}, Config{}, "max_tokens_per_mb"},
		{"overhead", []Sequence{seq(1)}, Config{MaxTokensPerMB: 4, MBOverheadTokens: -1}, "mb_overhead_tokens"},
		{"empty", []Sequence{seq()}, Config{MaxTokensPerMB: 4}, "empty sequence"},
		{"too long", []Sequence{seq(1, 2, 3, 4, 5)}, Config{MaxTokensPerMB: 4}, "exceeds max_tokens_per_mb"},
		{"negative", []Sequence{seq(1, -2)}, Config{MaxTokensPerMB: 4}, "negative token"},
		{"mask len", []Sequence{{Tokens: []int32{1, 2}, Loss: []bool{false}}}, Config{MaxTokensPerMB: 4}, "loss mask has 1 entries"},
		{"loss at 0", []Sequence{{Tokens: []int32{1, 2}, Loss: []bool{true, true}}}, Config{MaxTokensPerMB: 4}, "loss on token 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Pack(c.seqs, c.cfg)
			if err == nil || !contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
	if _, err := Pack([]Sequence{seq(1, 2, 3, 4, 5)}, Config{MaxTokensPerMB: 4}); !errors.Is(err, ErrTooLong) {
		t.Fatalf("err = %v, want ErrTooLong", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestPackEmpty(t *testing.T) {
	p, err := Pack(nil, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.MicroBatches) != 0 || p.TokenRatio() != 0 {
		t.Fatalf("empty packing %+v", p)
	}
}

// randomSeqs builds sequences that share prefixes the way rollouts do: each new sequence copies a
// random prefix of an earlier one (or starts fresh) and appends random tokens from a small vocab.
func randomSeqs(r *rand.Rand, n, maxLen int) []Sequence {
	var out []Sequence
	for i := 0; i < n; i++ {
		var toks []int32
		if len(out) > 0 && r.IntN(4) != 0 {
			base := out[r.IntN(len(out))].Tokens
			toks = slices.Clone(base[:r.IntN(len(base)+1)])
		}
		for extra := r.IntN(maxLen); extra > 0 || len(toks) == 0; extra-- {
			toks = append(toks, int32(r.IntN(4)))
		}
		if len(toks) > maxLen {
			toks = toks[:maxLen]
		}
		s := Sequence{Tokens: toks}
		if r.IntN(3) != 0 {
			s.Loss = make([]bool, len(toks))
			for j := 1; j < len(toks); j++ {
				s.Loss[j] = r.IntN(2) == 0
			}
		}
		out = append(out, s)
	}
	return out
}

// checkPacking verifies a packing against its input: every invariant of every micro-batch, each
// sequence in exactly one micro-batch and recoverable from its leaf, the mask rule equal to the
// ancestor relation, every loss token referenced exactly once at the right node.
func checkPacking(t *testing.T, seqs []Sequence, p *Packing, budget int) {
	t.Helper()
	seen := make([]int, len(seqs))
	refSeen := map[[2]int32]int{}
	var packed, loss int64
	for m, mb := range p.MicroBatches {
		if err := mb.Validate(); err != nil {
			t.Fatalf("mb %d: %v", m, err)
		}
		if err := mb.MicroBatch.Validate(0); err != nil {
			t.Fatalf("mb %d fails the gpu contract: %v", m, err)
		}
		if mb.Len() > budget {
			t.Fatalf("mb %d has %d tokens > budget %d", m, mb.Len(), budget)
		}
		packed += int64(mb.Len())
		for k, s := range mb.Seqs {
			seen[s]++
			if got := mb.SequenceTokens(k); !slices.Equal(got, seqs[s].Tokens) {
				t.Fatalf("mb %d: sequence %d recovered as %v, want %v", m, s, got, seqs[s].Tokens)
			}
		}
		// Mask rule ⇔ ancestor-or-self, by brute force on the parent array.
		if mb.Len() <= 200 {
			for i := 0; i < mb.Len(); i++ {
				anc := map[int]bool{}
				for a := i; a >= 0; a = int(mb.Parent[a]) {
					anc[a] = true
				}
				for j := 0; j < mb.Len(); j++ {
					if mb.Visible(i, j) != anc[j] {
						t.Fatalf("mb %d: visible(%d,%d)=%v but ancestor=%v", m, i, j, mb.Visible(i, j), anc[j])
					}
				}
			}
		}
		for c := 0; c < mb.Len(); c++ {
			for r := mb.RefStart[c]; r < mb.RefStart[c+1]; r++ {
				s, tok := mb.RefSeq[r], mb.RefTok[r]
				if !seqs[s].Loss[tok] || seqs[s].Tokens[tok] != mb.Tokens[c] {
					t.Fatalf("mb %d: node %d refers to (%d,%d) which is not a loss token with that id", m, c, s, tok)
				}
				refSeen[[2]int32{s, tok}]++
				loss++
			}
		}
	}
	for s, n := range seen {
		if n != 1 {
			t.Fatalf("sequence %d packed %d times", s, n)
		}
		for tok, on := range seqs[s].Loss {
			if on && refSeen[[2]int32{int32(s), int32(tok)}] != 1 {
				t.Fatalf("loss token (%d,%d) referenced %d times", s, tok, refSeen[[2]int32{int32(s), int32(tok)}])
			}
		}
	}
	if packed != p.PackedTokens || loss != p.LossTokens {
		t.Fatalf("accounting: packed %d vs %d, loss %d vs %d", packed, p.PackedTokens, loss, p.LossTokens)
	}
	if p.DistinctTokens > p.PackedTokens || p.PackedTokens > p.OriginalTokens {
		t.Fatalf("distinct %d ≤ packed %d ≤ original %d violated", p.DistinctTokens, p.PackedTokens, p.OriginalTokens)
	}
}

func TestPackProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		maxLen := 1 + r.IntN(20)
		seqs := randomSeqs(r, 1+r.IntN(30), maxLen)
		cfg := Config{MaxTokensPerMB: maxLen + r.IntN(40), MBOverheadTokens: r.IntN(5)}
		p, err := Pack(seqs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkPacking(t, seqs, p, cfg.MaxTokensPerMB)
	}
}

// TestPartitionOptimal compares the dynamic program with exhaustive search over every split of
// the pre-order into contiguous runs.
func TestPartitionOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 200; iter++ {
		maxLen := 1 + r.IntN(10)
		seqs := randomSeqs(r, 1+r.IntN(10), maxLen)
		budget := int64(maxLen + r.IntN(20))
		overhead := int64(r.IntN(6))
		var tr Tree
		for _, s := range seqs {
			if _, err := tr.Insert(s.Tokens); err != nil {
				t.Fatal(err)
			}
		}
		v := tr.Walk()
		cost := func(i, j int) int64 { // runs v[i:j]
			c := int64(len(seqs[v[i].Seq].Tokens))
			for k := i + 1; k < j; k++ {
				c += int64(len(seqs[v[k].Seq].Tokens)) - int64(v[k].LCP)
			}
			return c
		}
		objective := func(cuts []int) int64 {
			var total int64
			begin := 0
			for _, end := range cuts {
				c := cost(begin, end)
				if c > budget {
					return -1
				}
				total += c + overhead
				begin = end
			}
			return total
		}
		best := int64(-1)
		n := len(v)
		for mask := 0; mask < 1<<(n-1); mask++ {
			var cuts []int
			for b := 0; b < n-1; b++ {
				if mask&(1<<b) != 0 {
					cuts = append(cuts, b+1)
				}
			}
			cuts = append(cuts, n)
			if o := objective(cuts); o >= 0 && (best < 0 || o < best) {
				best = o
			}
		}
		got := objective(partition(v, seqs, budget, overhead))
		if got != best {
			t.Fatalf("iter %d: dp objective %d, exhaustive %d", iter, got, best)
		}
		// The union cost of a run equals the emitted micro-batch size.
		cuts := partition(v, seqs, budget, overhead)
		begin := 0
		for _, end := range cuts {
			if mb := emit(v[begin:end], seqs); int64(mb.Len()) != cost(begin, end) {
				t.Fatalf("emitted %d tokens, cost says %d", mb.Len(), cost(begin, end))
			}
			begin = end
		}
	}
}

func TestValidateRejects(t *testing.T) {
	good := func() *MicroBatch {
		p, err := Pack([]Sequence{lossFrom(seq(1, 2, 3), 1), lossFrom(seq(1, 2, 4), 2)}, Config{MaxTokensPerMB: 10})
		if err != nil {
			t.Fatal(err)
		}
		return p.MicroBatches[0]
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(m *MicroBatch){
		"lengths":          func(m *MicroBatch) { m.Positions = m.Positions[:1] },
		"parent after":     func(m *MicroBatch) { m.Parent[1] = 2 },
		"position":         func(m *MicroBatch) { m.Positions[2] = 5 },
		"subtree too long": func(m *MicroBatch) { m.SubtreeEnd[2] = 3 },
		"subtree short":    func(m *MicroBatch) { m.SubtreeEnd[1] = 2 },
		"root position":    func(m *MicroBatch) { m.Positions[0] = 1 },
		"ref depth":        func(m *MicroBatch) { m.RefTok[0] = 0 },
		"ref csr":          func(m *MicroBatch) { m.RefStart[len(m.RefStart)-1] = 0 },
		"seq end":          func(m *MicroBatch) { m.SeqEnd[0] = 99 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			m := good()
			mutate(m)
			if err := m.Validate(); err == nil {
				t.Fatal("Validate accepted a broken micro-batch")
			}
		})
	}
}

func TestCommonPrefix(t *testing.T) {
	cases := []struct {
		a, b []int32
		want int
	}{
		{nil, nil, 0},
		{[]int32{1}, nil, 0},
		{[]int32{1, 2, 3, 4, 5, 6}, []int32{1, 2, 3, 4, 5, 7}, 5},
		{[]int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 9},
		{[]int32{1, 2, 3}, []int32{1, 2, 3, 4}, 3},
		{[]int32{0, 2, 3, 4}, []int32{1, 2, 3, 4}, 0},
		{[]int32{1, 2, 9, 4, 5}, []int32{1, 2, 3, 4, 5}, 2},
	}
	for _, c := range cases {
		if got := commonPrefix(c.a, c.b); got != c.want {
			t.Errorf("commonPrefix(%v,%v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestChildrenGrowth(t *testing.T) {
	var tr Tree
	// 40 sequences that branch at the root: the root's child index switches to a map.
	for k := int32(0); k < 40; k++ {
		if _, err := tr.Insert([]int32{k, k + 1}); err != nil {
			t.Fatal(err)
		}
	}
	if tr.root.kids.index == nil {
		t.Fatal("child index did not grow into a map")
	}
	for k := int32(0); k < 40; k++ {
		if tr.root.kids.find(k) == nil {
			t.Fatalf("child %d lost", k)
		}
	}
	if tr.root.kids.find(99) != nil {
		t.Fatal("found a child that does not exist")
	}
	// Splitting an edge under a map-indexed node keeps the index right.
	if _, err := tr.Insert([]int32{5, 9}); err != nil {
		t.Fatal(err)
	}
	if n := tr.root.kids.find(5); n == nil || n.end != 1 {
		t.Fatalf("split child under map index: %+v", n)
	}
	if tr.DistinctTokens() != 81 {
		t.Fatalf("distinct %d, want 81", tr.DistinctTokens())
	}
}
