package prefixtree

// children is the child index of a trie node, keyed by the first token of each child's edge label.
//
// Fan-out in a token trie is small almost everywhere: the calls of an episode are a chain, the
// rollouts of a group branch n ways (8 by default) at their first differing token, and the tasks of
// a batch branch after the shared system prompt. As in nats-server's stree, the index grows by
// size class instead of always paying for a map: up to smallKids children live in two parallel
// slices scanned linearly (a few cache lines, no hashing), beyond that a map is added for O(1)
// lookup. Children always keep their insertion order in the slices, which makes the depth-first
// walk, and therefore packing, deterministic for a given input order.
type children struct {
	keys  []int32
	nodes []*node
	index map[int32]int32 // key → position in nodes; nil until len(keys) > smallKids
}

// smallKids is the size class boundary between linear scan and map lookup. A linear scan of 16
// int32 keys is faster than a Go map lookup on current amd64 hardware.
const smallKids = 16

// find returns the child whose label starts with tok, or nil.
func (c *children) find(tok int32) *node {
	if c.index != nil {
		if i, ok := c.index[tok]; ok {
			return c.nodes[i]
		}
		return nil
	}
	for i, k := range c.keys {
		if k == tok {
			return c.nodes[i]
		}
	}
	return nil
}

// add appends a child with first token tok. The caller guarantees tok is not present yet.
func (c *children) add(tok int32, n *node) {
	c.keys = append(c.keys, tok)
	c.nodes = append(c.nodes, n)
	switch {
	case c.index != nil:
		c.index[tok] = int32(len(c.nodes) - 1)
	case len(c.keys) > smallKids:
		c.index = make(map[int32]int32, 2*len(c.keys))
		for i, k := range c.keys {
			c.index[k] = int32(i)
		}
	}
}

// replace swaps the child keyed tok for n, keeping its position (used when an edge is split).
func (c *children) replace(tok int32, n *node) {
	if c.index != nil {
		c.nodes[c.index[tok]] = n
		return
	}
	for i, k := range c.keys {
		if k == tok {
			c.nodes[i] = n
			return
		}
	}
}

// len returns the number of children.
func (c *children) len() int { return len(c.nodes) }
