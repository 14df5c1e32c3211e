// Package kvcache is the sampler's block allocator for the paged KV cache: a fixed pool of
// physical blocks with reference counts. A block is referenced by every running request whose
// block table holds it and by the prefix cache (package radix) while it caches it; it returns to
// the free list when the last reference goes. The decoder's memory never grows: when the pool is
// empty the engine evicts prefix-cache entries or preempts a request, it never allocates more.
package kvcache

import "fmt"

// Pool hands out block ids in [0, n). It is not safe for concurrent use (the engine's loop owns it).
type Pool struct {
	ref  []int32
	free []int32 // a stack: the most recently freed block is reused first (warm in cache)
}

// New returns a pool of n free blocks.
func New(n int) *Pool {
	p := &Pool{ref: make([]int32, n), free: make([]int32, n)}
	for i := range p.free {
		p.free[i] = int32(n - 1 - i)
	}
	return p
}

// Alloc takes a free block with one reference, or reports that none is free.
func (p *Pool) Alloc() (int32, bool) {
	if len(p.free) == 0 {
		return -1, false
	}
	b := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.ref[b] = 1
	return b, true
}

// Retain adds a reference to an allocated block.
func (p *Pool) Retain(b int32) {
	if p.ref[b] <= 0 {
		panic(fmt.Sprintf("kvcache: retain of free block %d", b))
	}
	p.ref[b]++
}

// Release drops a reference; the block is free again when none is left.
func (p *Pool) Release(b int32) {
	if p.ref[b] <= 0 {
		panic(fmt.Sprintf("kvcache: release of free block %d", b))
	}
	p.ref[b]--
	if p.ref[b] == 0 {
		p.free = append(p.free, b)
	}
}

// ReleaseAll releases every block of a table.
func (p *Pool) ReleaseAll(blocks []int32) {
	for _, b := range blocks {
		p.Release(b)
	}
}

// Refs is the reference count of a block (0: free).
func (p *Pool) Refs(b int32) int32 { return p.ref[b] }

// Free is the number of free blocks.
func (p *Pool) Free() int { return len(p.free) }

// Total is the pool size.
func (p *Pool) Total() int { return len(p.ref) }
