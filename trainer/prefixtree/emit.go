package prefixtree

import "tau2rl/gpu"

// emit lays out one contiguous run of the trie pre-order as a MicroBatch. Sequences arrive in
// pre-order, so the micro-batch is built with a stack of the current root path (path[d] = node
// at depth d): each sequence pops the path back to its LCP with the previous one — closing those
// nodes' subtrees — and pushes its remaining tokens. The first sequence of the run starts from
// an empty path, which is where an ancestor path is duplicated when a tree spans micro-batches.
func emit(run []Visit, seqs []Sequence) *MicroBatch {
	size := 0
	for k, v := range run {
		size += len(seqs[v.Seq].Tokens)
		if k > 0 {
			size -= int(v.LCP)
		}
	}
	refs := size / 4 // a guess: loss tokens are the completions, a minority of the tokens
	mb := &MicroBatch{
		MicroBatch: gpu.MicroBatch{
			Tokens:     make([]int32, 0, size),
			Positions:  make([]int32, 0, size),
			Parent:     make([]int32, 0, size),
			SubtreeEnd: make([]int32, 0, size),
		},
		Seqs:   make([]int32, 0, len(run)),
		SeqEnd: make([]int32, 0, len(run)),
	}
	refNode := make([]int32, 0, refs)
	refSeq := make([]int32, 0, refs)
	refTok := make([]int32, 0, refs)
	path := make([]int32, 0, 256)
	closeTo := func(depth int) {
		last := int32(len(mb.Tokens) - 1)
		for d := len(path) - 1; d >= depth; d-- {
			mb.SubtreeEnd[path[d]] = last
		}
		path = path[:depth]
	}
	for k, v := range run {
		s := seqs[v.Seq]
		lcp := 0
		if k > 0 {
			lcp = int(v.LCP)
		}
		closeTo(lcp)
		for d := lcp; d < len(s.Tokens); d++ {
			i := int32(len(mb.Tokens))
			parent := int32(-1)
			if d > 0 {
				parent = path[d-1]
			}
			mb.Tokens = append(mb.Tokens, s.Tokens[d])
			mb.Positions = append(mb.Positions, int32(d))
			mb.Parent = append(mb.Parent, parent)
			mb.SubtreeEnd = append(mb.SubtreeEnd, i)
			path = append(path, i)
		}
		mb.Seqs = append(mb.Seqs, v.Seq)
		mb.SeqEnd = append(mb.SeqEnd, path[len(s.Tokens)-1])
		for t, on := range s.Loss {
			if on {
				refNode = append(refNode, path[t])
				refSeq = append(refSeq, v.Seq)
				refTok = append(refTok, int32(t))
			}
		}
	}
	closeTo(0)

	// Counting sort of the references by node into CSR, stable in sequence order.
	n := len(mb.Tokens)
	mb.RefStart = make([]int32, n+1)
	for _, c := range refNode {
		mb.RefStart[c+1]++
	}
	for c := 0; c < n; c++ {
		mb.RefStart[c+1] += mb.RefStart[c]
	}
	mb.RefSeq = make([]int32, len(refNode))
	mb.RefTok = make([]int32, len(refNode))
	fill := make([]int32, n)
	copy(fill, mb.RefStart[:n])
	for r, c := range refNode {
		at := fill[c]
		fill[c]++
		mb.RefSeq[at] = refSeq[r]
		mb.RefTok[at] = refTok[r]
	}
	// Only nodes that stand for a loss token need the LM head (see gpu.MicroBatch.Score).
	mb.Score = make([]bool, n)
	for c := range n {
		mb.Score[c] = mb.RefStart[c+1] > mb.RefStart[c]
	}
	return mb
}
