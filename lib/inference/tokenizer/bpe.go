package tokenizer

import (
	"container/heap"
	"sync"
)

// symbol is one node of the doubly linked list HF's Word keeps while merging.
type symbol struct {
	id         int32
	prev, next int32 // -1 when absent
	size       int32 // bytes covered; 0 once merged into its left neighbour
}

// pendingMerge is a queued merge of the pair starting at pos. HF's BinaryHeap
// orders by rank, then by position: lowest first.
type pendingMerge struct {
	rank, pos, newID int32
}

type mergeQueue []pendingMerge

func (q mergeQueue) Len() int { return len(q) }
func (q mergeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q mergeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mergeQueue) Push(x any)   { *q = append(*q, x.(pendingMerge)) }
func (q *mergeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

type wordScratch struct {
	syms  []symbol
	queue mergeQueue
}

var scratchPool = sync.Pool{New: func() any { return new(wordScratch) }}

// lookup returns the merge of the pair (l, r), if any.
func (t *Tokenizer) lookup(l, r int32) (rank, newID int32, ok bool) {
	v, ok := t.merges[uint64(uint32(l))<<32|uint64(uint32(r))]
	return int32(v >> 32), int32(uint32(v)), ok
}

// mergeWord runs HF's BPE Word::merge_all over the bytes of piece and appends
// the resulting ids. The queue may hold stale entries; an entry is applied
// only if the pair now at its position still merges into the same id, exactly
// as HF checks.
func (t *Tokenizer) mergeWord(dst []int32, piece string) []int32 {
	s := scratchPool.Get().(*wordScratch)
	defer scratchPool.Put(s)
	n := len(piece)
	syms := s.syms[:0]
	for i := 0; i < n; i++ {
		syms = append(syms, symbol{id: t.byteID[piece[i]], prev: int32(i - 1), next: int32(i + 1), size: 1})
	}
	syms[n-1].next = -1
	q := s.queue[:0]
	for i := 0; i+1 < n; i++ {
		if rank, nid, ok := t.lookup(syms[i].id, syms[i+1].id); ok {
			q = append(q, pendingMerge{rank: rank, pos: int32(i), newID: nid})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		top := heap.Pop(&q).(pendingMerge)
		cur := &syms[top.pos]
		if cur.size == 0 || cur.next == -1 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		if _, nid, ok := t.lookup(cur.id, right.id); !ok || nid != top.newID {
			continue
		}
		// Merge right into cur.
		cur.id = top.newID
		cur.size += right.size
		cur.next = right.next
		syms[nextPos].size = 0
		if right.next != -1 {
			syms[right.next].prev = top.pos
		}
		if cur.prev != -1 {
			if rank, nid, ok := t.lookup(syms[cur.prev].id, cur.id); ok {
				heap.Push(&q, pendingMerge{rank: rank, pos: cur.prev, newID: nid})
			}
		}
		if cur.next != -1 {
			if rank, nid, ok := t.lookup(cur.id, syms[cur.next].id); ok {
				heap.Push(&q, pendingMerge{rank: rank, pos: top.pos, newID: nid})
			}
		}
	}
	for i := int32(0); i != -1; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	s.syms, s.queue = syms, q
	return dst
}
