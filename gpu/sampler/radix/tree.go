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
}

// Tree is the prefix cache over one pool. It is not safe for concurrent use.
type Tree struct {
	pool  *kvcache.Pool
	bs    int
	root  *node
	clock uint64
	nodes int
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
	t.clock++
	adopted := 0
	n := t.root
	for b := 0; b < len(blocks) && (b+1)*t.bs <= len(tokens); b++ {
		k := keyOf(tokens[b*t.bs : (b+1)*t.bs])
		c, ok := n.children[k]
		if !ok {
			c = &node{key: k, block: blocks[b], parent: n, children: map[string]*node{}}
			n.children[k] = c
			t.pool.Retain(c.block)
			t.nodes++
			adopted++
		}
		c.last = t.clock
		n = c
	}
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

func (t *Tree) remove(x *node) {
	delete(x.parent.children, x.key)
	t.pool.Release(x.block)
	t.nodes--
}

// Flush drops every entry (after a weight update the cached keys and values are stale). Blocks
// still in a running request's table stay allocated to it.
func (t *Tree) Flush() {
	var walk func(*node)
	walk = func(x *node) {
		for _, c := range x.children {
			walk(c)
			t.pool.Release(c.block)
		}
	}
	walk(t.root)
	t.root = &node{children: map[string]*node{}}
	t.nodes = 0
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
