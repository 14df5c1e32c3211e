package radix

import (
	"fmt"
	"math/rand/v2"
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

// dump lists the tree's entries as "path tokens → block", sorted, for comparing two trees.
func dump(t *Tree) []string {
	var out []string
	var walk func(x *node, path string)
	walk = func(x *node, path string) {
		for _, c := range x.children {
			p := path + c.key
			out = append(out, fmt.Sprintf("%x=%d", p, c.block))
			walk(c, p)
		}
	}
	walk(t.root, "")
	slices.Sort(out)
	return out
}

// TestInsertFromMatchesInsert drives two trees through the same engine-like history — requests
// that share prefixes, grow a few tokens at a time, insert their full blocks, finish, get
// evicted under a small pool, and a flush now and then — one inserting from the root each time
// (Insert), the other from each request's cursor (InsertFrom). Their entries, the blocks each
// eviction frees and the pools' free lists must stay identical: the cursor changes the work,
// not the cache (nor the least-recently-used order, which decides which blocks get reused).
func TestInsertFromMatchesInsert(t *testing.T) {
	const bs = 4
	type req struct {
		tokens, blocks []int32
		inserted       int
		cur            Cursor
	}
	type world struct {
		pool *kvcache.Pool
		tree *Tree
		reqs []*req
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		ws := [2]*world{}
		for i := range ws {
			p := kvcache.New(48)
			ws[i] = &world{pool: p, tree: New(p, bs)}
		}
		prefixes := [][]int32{{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 9, 9, 9, 9}, {7, 7}}
		var evicted [2][]int
		for op := range 400 {
			r := rng.IntN(100)
			pick := rng.IntN(1 << 20)
			grow := 1 + rng.IntN(2*bs)
			toks := make([]int32, grow)
			for i := range toks {
				toks[i] = int32(rng.IntN(3))
			}
			nev := 1 + rng.IntN(4)
			for wi, w := range ws {
				switch {
				case r < 15 || len(w.reqs) == 0: // a new request: a shared prefix, the cache's match
					q := &req{tokens: slices.Clone(prefixes[pick%len(prefixes)])}
					q.blocks = w.tree.Match(q.tokens, (len(q.tokens)-1)/bs)
					q.inserted = len(q.blocks)
					w.reqs = append(w.reqs, q)
				case r < 25: // a request finishes
					i := pick % len(w.reqs)
					w.pool.ReleaseAll(w.reqs[i].blocks)
					w.reqs = slices.Delete(w.reqs, i, i+1)
				case r < 30:
					evicted[wi] = append(evicted[wi], w.tree.Evict(nev))
				case r < 32:
					w.tree.Flush()
				default: // a request computes more tokens and hands its full blocks to the cache
					q := w.reqs[pick%len(w.reqs)]
					q.tokens = append(q.tokens, toks...)
					for len(q.blocks)*bs < len(q.tokens) {
						b, ok := w.pool.Alloc()
						if !ok && w.tree.Evict(2) > 0 {
							b, ok = w.pool.Alloc()
						}
						if !ok {
							q.tokens = q.tokens[:len(q.blocks)*bs]
							break
						}
						q.blocks = append(q.blocks, b)
					}
					if full := len(q.tokens) / bs; full > q.inserted {
						if wi == 0 {
							w.tree.Insert(q.tokens[:full*bs], q.blocks[:full])
						} else {
							w.tree.InsertFrom(&q.cur, q.tokens[:full*bs], q.blocks[:full])
						}
						q.inserted = full
					}
				}
			}
			a, b := ws[0], ws[1]
			if da, db := dump(a.tree), dump(b.tree); !slices.Equal(da, db) {
				t.Fatalf("seed %d op %d: trees differ\nInsert:     %v\nInsertFrom: %v", seed, op, da, db)
			}
			if !slices.Equal(evicted[0], evicted[1]) || a.pool.Free() != b.pool.Free() || a.tree.Evictable() != b.tree.Evictable() {
				t.Fatalf("seed %d op %d: evicted %v vs %v, free %d vs %d", seed, op, evicted[0], evicted[1], a.pool.Free(), b.pool.Free())
			}
			for i := range a.reqs {
				if !slices.Equal(a.reqs[i].blocks, b.reqs[i].blocks) {
					t.Fatalf("seed %d op %d: request %d's blocks %v vs %v (eviction order differs)", seed, op, i, a.reqs[i].blocks, b.reqs[i].blocks)
				}
			}
		}
	}
}

// TestInsertFromStaleCursor: a cursor whose node was evicted, or that predates a Flush, or that
// lies deeper than the blocks given, starts over from the root instead of attaching blocks
// under a node the tree no longer has.
func TestInsertFromStaleCursor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stale func(tr *Tree, p *kvcache.Pool, bl []int32) ([]int32, []int32) // returns the next call's tokens, blocks
	}{
		{"evicted", func(tr *Tree, p *kvcache.Pool, bl []int32) ([]int32, []int32) {
			// The tree adopted the request's blocks, so the request's release leaves the tree
			// their only holder and Evict frees both, the cursor's node among them.
			p.ReleaseAll(bl)
			if got := tr.Evict(10); got != 2 {
				t.Fatalf("evicted %d", got)
			}
			return []int32{1, 2, 3, 4, 5, 6}, alloc(t, p, 3)
		}},
		{"flushed", func(tr *Tree, p *kvcache.Pool, bl []int32) ([]int32, []int32) {
			tr.Flush()
			return []int32{1, 2, 3, 4, 5, 6}, append(bl, alloc(t, p, 1)...)
		}},
		{"shorter", func(tr *Tree, p *kvcache.Pool, bl []int32) ([]int32, []int32) {
			tr.Flush()
			return []int32{1, 2}, bl[:1]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := kvcache.New(8)
			tr := New(p, 2)
			bl := alloc(t, p, 2)
			var c Cursor
			if got := tr.InsertFrom(&c, []int32{1, 2, 3, 4}, bl); got != 2 || c.depth != 2 {
				t.Fatalf("adopted %d, cursor depth %d", got, c.depth)
			}
			toks, blocks := tc.stale(tr, p, bl)
			tr.InsertFrom(&c, toks, blocks)
			want := len(toks) / 2
			if got := tr.Match(toks, 10); len(got) != want || !slices.Equal(got, blocks[:want]) {
				t.Fatalf("after a stale cursor, match %v, want %v: the insert did not start at the root", got, blocks[:want])
			}
			if tr.Blocks() != want || c.depth != want {
				t.Fatalf("tree blocks %d, cursor depth %d, want %d", tr.Blocks(), c.depth, want)
			}
		})
	}
}

// BenchmarkInsertHistory is the engine's prefix-cache work for one request over a τ²-length
// history (5,000-token prompt, then a block filled at a time, 16-token blocks): from the root
// each time (what the engine did) against from the request's cursor.
func BenchmarkInsertHistory(b *testing.B) {
	const bs, total = 16, 5000 + 6*350
	tokens := make([]int32, total)
	for i := range tokens {
		tokens[i] = int32(i)
	}
	for _, mode := range []string{"root", "cursor"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				p := kvcache.New(total/bs + 1)
				tr := New(p, bs)
				blocks := make([]int32, total/bs)
				for i := range blocks {
					blocks[i], _ = p.Alloc()
				}
				var c Cursor
				for full := 5000 / bs; full <= len(blocks); full++ {
					if mode == "root" {
						tr.Insert(tokens[:full*bs], blocks[:full])
					} else {
						tr.InsertFrom(&c, tokens[:full*bs], blocks[:full])
					}
				}
			}
		})
	}
}
