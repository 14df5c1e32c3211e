package kvcache

import "testing"

func TestPool(t *testing.T) {
	p := New(3)
	a, _ := p.Alloc()
	b, _ := p.Alloc()
	c, ok := p.Alloc()
	if !ok || a == b || b == c || p.Free() != 0 {
		t.Fatalf("alloc %d %d %d free %d", a, b, c, p.Free())
	}
	if _, ok := p.Alloc(); ok {
		t.Fatal("allocated past the pool")
	}
	p.Retain(b)
	p.Release(b)
	if p.Free() != 0 || p.Refs(b) != 1 {
		t.Fatalf("retain/release: free %d refs %d", p.Free(), p.Refs(b))
	}
	p.ReleaseAll([]int32{a, b})
	if p.Free() != 2 || p.Refs(a) != 0 {
		t.Fatalf("free %d", p.Free())
	}
	if d, _ := p.Alloc(); d != b {
		t.Fatalf("want the last freed block %d reused, got %d", b, d)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("double release did not panic")
		}
	}()
	p.Release(a)
}
