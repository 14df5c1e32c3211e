package prefixtree

import (
	"fmt"
	"math"
)

// Tree is a radix trie over token sequences. The zero value is an empty tree ready to use; a nil
// *Tree reports zero sizes. Tree keeps references to the inserted slices (it never copies tokens),
// so callers must not modify a sequence after inserting it.
type Tree struct {
	root     node
	seqs     [][]int32
	distinct int64 // number of trie tokens (sum of edge label lengths)
	original int64 // sum of inserted sequence lengths
	nodes    int
}

// Insert adds seq to the tree and returns its sequence index (insertion order, from 0). Shared
// prefixes are stored once; a sequence equal to, or a prefix of, an earlier one adds no tokens.
func (t *Tree) Insert(seq []int32) (int, error) {
	if len(seq) == 0 {
		return 0, ErrEmptySequence
	}
	if len(t.seqs) >= math.MaxInt32 || len(seq) >= math.MaxInt32 {
		return 0, fmt.Errorf("prefixtree: insert: sequence %d of %d tokens exceeds int32 indexing", len(t.seqs), len(seq))
	}
	id := int32(len(t.seqs))
	t.seqs = append(t.seqs, seq)
	t.original += int64(len(seq))

	cur, pos := &t.root, 0
	for pos < len(seq) {
		child := cur.kids.find(seq[pos])
		if child == nil {
			leaf := &node{seq: id, start: int32(pos), end: int32(len(seq))}
			cur.kids.add(seq[pos], leaf)
			t.distinct += int64(len(seq) - pos)
			t.nodes++
			cur = leaf
			break
		}
		lbl := child.label(t.seqs)
		m := commonPrefix(lbl, seq[pos:])
		if m < len(lbl) {
			// Split the edge: mid takes the shared part, child keeps the rest.
			mid := &node{seq: child.seq, start: child.start, end: child.start + int32(m)}
			child.start += int32(m)
			mid.kids.add(lbl[m], child)
			cur.kids.replace(seq[pos], mid)
			t.nodes++
			child = mid
		}
		cur, pos = child, pos+m
	}
	cur.ends = append(cur.ends, id)
	return int(id), nil
}

// Len returns the number of inserted sequences.
func (t *Tree) Len() int {
	if t == nil {
		return 0
	}
	return len(t.seqs)
}

// Seq returns the tokens of sequence i as inserted.
func (t *Tree) Seq(i int) []int32 { return t.seqs[i] }

// DistinctTokens returns the number of tokens in the trie: every shared prefix counted once. It is
// the lower bound on the tokens any packing of the tree must compute.
func (t *Tree) DistinctTokens() int64 {
	if t == nil {
		return 0
	}
	return t.distinct
}

// OriginalTokens returns the sum of the inserted sequence lengths (the tokens computed without a
// tree).
func (t *Tree) OriginalTokens() int64 {
	if t == nil {
		return 0
	}
	return t.original
}

// Nodes returns the number of radix nodes (edges), excluding the root.
func (t *Tree) Nodes() int {
	if t == nil {
		return 0
	}
	return t.nodes
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	i := 0
	// Compare four tokens per iteration; the bounds checks vanish after the reslice above.
	for ; i+4 <= n; i += 4 {
		if a[i] != b[i] || a[i+1] != b[i+1] || a[i+2] != b[i+2] || a[i+3] != b[i+3] {
			break
		}
	}
	for ; i < n && a[i] == b[i]; i++ {
	}
	return i
}
