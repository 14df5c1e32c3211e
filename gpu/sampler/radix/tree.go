// Package radix is the sampler's prefix cache: a radix tree over token ids at block granularity,
// in the spirit of SGLang's RadixAttention and vLLM's automatic prefix caching. Each node below
// the root stands for one full KV-cache block: the BlockSize token ids it holds (given everything
// on the path above it) and the physical block whose keys and values were computed for them.
//
// A τ² episode resends its whole history every turn, and every episode of a domain starts with
// the same system prompt and tool list, so a request usually finds most of its prompt here and
// prefills only the new turn. Only full blocks are cached, so a block in the tree is never written
// again: a request that matches a prefix appends into blocks of its own.
//
// The tree holds one pool reference per cached block. Blocks referenced by nothing else are
// evictable; Evict frees the least recently used leaves first (a parent is only evictable once
// all its children are gone, so the shared system prompt outlives the episodes that branch from it).
package radix

import (
	"slices"
	"unsafe"

	"tau2rl/gpu/sampler/kvcache"
)

type node struct {
	key      string // the block's token ids, as bytes
	block    int32
	parent   *node
	children map[string]*node
	last     uint64 // logical time of the last match or insert through this node
	gone     bool   // evicted or flushed: a Cursor still pointing here starts over from the root
}

// Cursor remembers where a request's last InsertFrom ended, so the next one walks only the
// blocks filled since instead of the whole history from the root. A τ² request's history is
// thousands of tokens, a block fills every BlockSize generated tokens, and each insert from the
// root hashes every block on the path: with a cursor the engine's prefix-cache work per step no
// longer grows with the history length. The zero Cursor starts at the root.
type Cursor struct {
	n     *node
	depth int    // blocks from the root to n
	epoch uint64 // the tree's Flush count when n was reached
}

// Tree is the prefix cache over one pool. It is not safe for concurrent use.
type Tree struct {
	pool  *kvcache.Pool
	bs    int
	root  *node
	clock uint64
	nodes int
	epoch uint64 // Flush count: a Cursor from before a Flush is stale
}

// New returns an empty tree caching blocks of blockSize tokens from pool.
func New(pool *kvcache.Pool, blockSize int) *Tree {
	return &Tree{pool: pool, bs: blockSize, root: &node{children: map[string]*node{}}}
}

// keyOf is the map key of one block of token ids (its bytes; no copy of meaning, just identity).
func keyOf(ids []int32) string {
	return string(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ids))), len(ids)*4))
}

// Match returns the physical blocks caching the longest prefix of tokens made of full blocks, at
// most maxBlocks of them, and retains each for the caller (who releases them with its table).
func (t *Tree) Match(tokens []int32, maxBlocks int) []int32 {
	t.clock++
	var out []int32
	n := t.root
	for b := 0; b < maxBlocks && (b+1)*t.bs <= len(tokens); b++ {
		c, ok := n.children[keyOf(tokens[b*t.bs:(b+1)*t.bs])]
		if !ok {
			break
		}
		c.last = t.clock
		t.pool.Retain(c.block)
		out = append(out, c.block)
		n = c
	}
	return out
}

// Insert records that blocks[i] holds the keys and values of tokens[i·B:(i+1)·B] for every full
// block of tokens covered by blocks. Blocks the tree did not know are retained by it; where the
// tree already caches a block for the same tokens it keeps its own (the caller's copy is freed
// with the caller's table). It returns how many blocks the tree adopted.
func (t *Tree) Insert(tokens []int32, blocks []int32) int {
	var c Cursor
	return t.InsertFrom(&c, tokens, blocks)
}

// InsertFrom is Insert continuing from c, where the same request's previous InsertFrom ended
// (tokens and blocks then extend what that call saw), and leaves c at the last full block.
// It walks from the root instead when c is the zero Cursor, when the node it points to has
// been evicted or flushed since, or when it lies deeper than the blocks given (the caller
// started over), so a stale cursor costs one full walk, never a wrong entry.
//
// Only the nodes walked are stamped as used; the ancestors above c keep older stamps. Eviction
// order is unchanged all the same: Evict frees leaves only, and removing a node carries its
// stamp up to its parent, so a node that becomes a leaf is at least as recent as anything that
// was below it (as when every insert stamped the whole path).
func (t *Tree) InsertFrom(c *Cursor, tokens []int32, blocks []int32) int {
	t.clock++
	adopted := 0
	n, b := t.root, 0
	if c.n != nil && !c.n.gone && c.epoch == t.epoch && c.depth <= len(blocks) && c.depth*t.bs <= len(tokens) {
		n, b = c.n, c.depth
	}
	for ; b < len(blocks) && (b+1)*t.bs <= len(tokens); b++ {
		k := keyOf(tokens[b*t.bs : (b+1)*t.bs])
		ch, ok := n.children[k]
		if !ok {
			ch = &node{key: k, block: blocks[b], parent: n, children: map[string]*node{}}
			n.children[k] = ch
			t.pool.Retain(ch.block)
			t.nodes++
			adopted++
		}
		ch.last = t.clock
		n = ch
	}
	*c = Cursor{n: n, depth: b, epoch: t.epoch}
	return adopted
}

// Evict frees up to n blocks that only the tree references, least recently used leaves first,
// and returns how many it freed.
func (t *Tree) Evict(n int) int {
	freed := 0
	for freed < n {
		var leaves []*node
		var walk func(*node)
		walk = func(x *node) {
			for _, c := range x.children {
				if len(c.children) == 0 {
					if t.pool.Refs(c.block) == 1 {
						leaves = append(leaves, c)
					}
				} else {
					walk(c)
				}
			}
		}
		walk(t.root)
		if len(leaves) == 0 {
			return freed
		}
		slices.SortFunc(leaves, func(a, b *node) int {
			switch {
			case a.last < b.last:
				return -1
			case a.last > b.last:
				return 1
			}
			return int(a.block - b.block)
		})
		for _, l := range leaves {
			if freed == n {
				break
			}
			t.remove(l)
			freed++
		}
	}
	return freed
}

// remove drops leaf x, handing its use stamp to its parent (see InsertFrom).
func (t *Tree) remove(x *node) {
	delete(x.parent.children, x.key)
	x.parent.last = max(x.parent.last, x.last)
	x.gone = true
	t.pool.Release(x.block)
	t.nodes--
}

// Flush drops every entry (after a weight update the cached keys and values are stale). Blocks
// still in a running request's table stay allocated to it. The others return to the pool in
// block order rather than the maps' random order, so which blocks later requests get (and so
// the engine's whole block layout) depends only on the requests, run after run.
func (t *Tree) Flush() {
	var blocks []int32
	var walk func(*node)
	walk = func(x *node) {
		for _, c := range x.children {
			walk(c)
			c.gone = true
			blocks = append(blocks, c.block)
		}
	}
	walk(t.root)
	slices.Sort(blocks)
	for _, b := range blocks {
		t.pool.Release(b)
	}
	t.root = &node{children: map[string]*node{}}
	t.nodes = 0
	t.epoch++
}

// Blocks is the number of blocks the tree caches.
func (t *Tree) Blocks() int { return t.nodes }

// Evictable counts the cached blocks no request references (what Evict could free).
func (t *Tree) Evictable() int {
	n := 0
	var walk func(*node)
	walk = func(x *node) {
		for _, c := range x.children {
			if t.pool.Refs(c.block) == 1 {
				n++
			}
			walk(c)
		}
	}
	walk(t.root)
	return n
}
