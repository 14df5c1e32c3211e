package radix

import (
	"slices"
	"testing"

	"tau2rl/gpu/sampler/kvcache"
)

func alloc(t *testing.T, p *kvcache.Pool, n int) []int32 {
	t.Helper()
	out := make([]int32, n)
	for i := range out {
		b, ok := p.Alloc()
		if !ok {
			t.Fatal("pool empty")
		}
		out[i] = b
	}
	return out
}

func TestMatchInsertEvict(t *testing.T) {
	p := kvcache.New(8)
	tr := New(p, 2)
	a := []int32{1, 2, 3, 4, 5}
	ba := alloc(t, p, 3)
	if got := tr.Insert(a, ba); got != 2 { // the partial third block is not cached
		t.Fatalf("adopted %d", got)
	}
	p.ReleaseAll(ba) // request a finishes
	if p.Free() != 6 || tr.Blocks() != 2 || tr.Evictable() != 2 {
		t.Fatalf("free %d blocks %d evictable %d", p.Free(), tr.Blocks(), tr.Evictable())
	}
	// b shares the first block only.
	b := []int32{1, 2, 9, 9, 7, 7}
	m := tr.Match(b, 10)
	if !slices.Equal(m, ba[:1]) {
		t.Fatalf("match %v, want %v", m, ba[:1])
	}
	if tr.Evictable() != 1 { // the matched block is in use
		t.Fatalf("evictable %d", tr.Evictable())
	}
	if got := tr.Match(a, 1); len(got) != 1 {
		t.Fatalf("maxBlocks ignored: %v", got)
	}
	p.Release(ba[0])
	bb := append(m, alloc(t, p, 2)...)
	tr.Insert(b, bb)
	p.ReleaseAll(bb)
	if tr.Blocks() != 4 {
		t.Fatalf("blocks %d", tr.Blocks())
	}
	// Touch b's branch so a's leaf is the least recently used.
	p.ReleaseAll(tr.Match(b, 10))
	if got := tr.Evict(1); got != 1 {
		t.Fatalf("evicted %d", got)
	}
	if got := tr.Match(a, 10); len(got) != 1 {
		t.Fatalf("a's second block should be gone, match %v", got)
	} else {
		p.ReleaseAll(got)
	}
	if got := tr.Evict(100); got != 3 || p.Free() != 8 || tr.Blocks() != 0 {
		t.Fatalf("evict all: %d free %d blocks %d", got, p.Free(), tr.Blocks())
	}
}

func TestFlushKeepsRunningBlocks(t *testing.T) {
	p := kvcache.New(4)
	tr := New(p, 1)
	bl := alloc(t, p, 3)
	tr.Insert([]int32{5, 6, 7}, bl)
	tr.Flush()
	if p.Free() != 1 || tr.Blocks() != 0 {
		t.Fatalf("free %d blocks %d", p.Free(), tr.Blocks())
	}
	p.ReleaseAll(bl)
	if p.Free() != 4 {
		t.Fatalf("free %d", p.Free())
	}
}
