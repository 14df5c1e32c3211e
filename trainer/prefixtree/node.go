package prefixtree

// node is one vertex of the radix trie. The edge into the node is labelled with the tokens
// seqs[seq][start:end] of the tree's sequences; because the path from the root to the node spells
// seqs[seq][0:end], end is also the node's depth (the number of tokens on its path).
//
// Keeping (seq, start, end) instead of a copied []int32 label means the trie never allocates token
// storage: it is an index over the caller's slices, 32 bytes plus its child index per node.
type node struct {
	seq   int32 // sequence whose tokens label the edge into this node
	start int32 // first token of the label within seqs[seq]
	end   int32 // one past the last token; also the depth of the node
	kids  children
	// ends lists the sequences that end exactly at this node, in insertion order.
	ends []int32
}

// label returns the edge label of n within the tree's sequences.
func (n *node) label(seqs [][]int32) []int32 {
	return seqs[n.seq][n.start:n.end]
}
