package prefixtree

// Visit is one sequence in trie pre-order: its index and the length of the longest common prefix
// it shares with the sequence visited just before it (0 for the first).
type Visit struct {
	Seq int32
	LCP int32
}

// Walk lists every inserted sequence in depth-first pre-order of the trie (children in insertion
// order; sequences ending at the same node in insertion order) with the LCP to its predecessor.
//
// Why the order matters: for trie pre-order the longest prefix a sequence shares with any earlier
// sequence equals the prefix it shares with the immediately preceding one. So the union of the
// root paths of a contiguous run s_i..s_j has exactly len(s_i) + Σ_{k>i} (len(s_k) − LCP_k) tokens,
// which Pack uses to cost micro-batches in O(1).
func (t *Tree) Walk() []Visit {
	if t == nil || len(t.seqs) == 0 {
		return nil
	}
	out := make([]Visit, 0, len(t.seqs))
	// minDepth is the shallowest depth the walk has passed through since the last visit: the
	// branch point, i.e. the LCP of the next visited sequence with the previous one.
	var minDepth int32
	type frame struct {
		n    *node
		next int // next child to descend into
	}
	stack := []frame{{n: &t.root}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.next == 0 {
			for _, s := range top.n.ends {
				out = append(out, Visit{Seq: s, LCP: min(minDepth, top.n.end)})
				minDepth = top.n.end
			}
		}
		if top.next < top.n.kids.len() {
			child := top.n.kids.nodes[top.next]
			top.next++
			stack = append(stack, frame{n: child})
			continue
		}
		stack = stack[:len(stack)-1]
		if len(stack) > 0 {
			minDepth = min(minDepth, stack[len(stack)-1].n.end)
		}
	}
	if len(out) > 0 {
		out[0].LCP = 0
	}
	return out
}
