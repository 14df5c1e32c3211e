package cuda

import (
	"slices"
	"unsafe"

	"tau2rl/gpu"
)

// Shared-prefix (cascade) attention planning for the serving Decoder (issue 28); pure Go, so CI
// tests it without a GPU.

// cascadeMinGroup is the fewest decoding sequences sharing a cached prefix that get it read once
// for the group (cascade attention); a lone sequence reads its own blocks.
const cascadeMinGroup = 2

// cascadeRange is part of a decode token's cached keys, [lo, hi), read once for the sequences of
// group (an index into planner.groups). seg is the range's first split among the sequence's
// partial slots (set by plan).
type cascadeRange struct{ lo, hi, group, seg int }

// cascadeGroup is a shared range, [lo, hi) keys, and its members planner.members[m0:m1] (in step
// order).
type cascadeGroup struct{ lo, hi, m0, m1 int }

// cascadeLevelItem is a physical block found at one cascade level and the sequences having it there.
type cascadeLevelItem struct {
	block int32
	n     int // sequences with the block at this level
	start int // their first index in planner.members, -1 for fewer than cascadeMinGroup
	fill  int // members laid out so far
}

// cascade finds, among decode tokens, the cached prefixes that several share: the sequences idx
// are grouped by the physical block at block index from, and a group's longest common run of
// blocks (all of it visible to every member) becomes a shared range; the members then split
// again after it (a τ² step: the system prompt shared by all, then each task's opening by its
// samples). It appends to pl.groups (depth first: a group, then the groups nested in it, then
// its next sibling), pl.members/pl.mrange and each member's pl.ranges (so in key order); pl.keys
// holds the keys each sequence's paged items read.
//
// Cost, in blocks: one block read per sequence per level (a bucket by block id, no maps), and a
// group's common run compared once per member against the first — so O(Σ over groups of members ×
// run length), at most the decode tokens' blocks once per nesting level they are shared at.
func (pl *planner) cascade(seqs []gpu.ServeSeq, idx []int, from int) {
	bs := pl.blockSize
	base := len(pl.level)
	for _, i := range idx {
		blocks := seqs[i].Blocks
		if (from+1)*bs > pl.keys[i] || from >= len(blocks) {
			continue
		}
		b := blocks[from]
		if int(b) >= len(pl.slotOf) {
			pl.slotOf = append(pl.slotOf, make([]int32, int(b)+1-len(pl.slotOf))...)
		}
		k := pl.slotOf[b]
		if k == 0 {
			pl.level = append(pl.level, cascadeLevelItem{block: b, start: -1})
			k = int32(len(pl.level))
			pl.slotOf[b] = k
		}
		pl.level[k-1].n++
	}
	top := len(pl.level)
	// Lay the groups' members out, in idx order within each group, then clear the buckets before
	// the nested levels use them.
	at := len(pl.members)
	for e := base; e < top; e++ {
		if it := &pl.level[e]; it.n >= cascadeMinGroup {
			it.start = at
			at += it.n
		}
	}
	pl.members = extended(pl.members, at)
	pl.mrange = extended(pl.mrange, at)
	for _, i := range idx {
		blocks := seqs[i].Blocks
		if (from+1)*bs > pl.keys[i] || from >= len(blocks) {
			continue
		}
		if it := &pl.level[pl.slotOf[blocks[from]]-1]; it.start >= 0 {
			pl.members[it.start+it.fill] = i
			it.fill++
		}
	}
	for e := base; e < top; e++ {
		pl.slotOf[pl.level[e].block] = 0
	}
	for e := base; e < top; e++ {
		it := pl.level[e] // a copy: the nested levels below append to pl.level
		if it.start < 0 {
			continue
		}
		m0, m1 := it.start, it.start+it.n
		members := pl.members[m0:m1]
		// The common run: from+1 up to the first block index some member lacks, cannot see
		// entirely, or holds a different block at.
		end := len(seqs[members[0]].Blocks)
		for _, i := range members {
			end = min(end, len(seqs[i].Blocks), pl.keys[i]/bs)
		}
		ref := seqs[members[0]].Blocks[:end]
		for _, i := range members[1:] {
			end = commonRun(ref[:end], seqs[i].Blocks[:end], from+1)
		}
		g := len(pl.groups)
		pl.groups = append(pl.groups, cascadeGroup{lo: from * bs, hi: end * bs, m0: m0, m1: m1})
		for j, i := range members {
			pl.mrange[m0+j] = int32(len(pl.ranges[i]))
			pl.ranges[i] = append(pl.ranges[i], cascadeRange{lo: from * bs, hi: end * bs, group: g})
		}
		// members stays readable while the nested levels append to pl.members (a grown array
		// is a copy; the old one is not written again).
		pl.cascade(seqs, members, end)
	}
	pl.level = pl.level[:base]
}

// commonRun is the first index ≥ k where a and b (of equal length) differ, or their length. It
// compares runChunk blocks at a time with the runtime's vectorized memory compare, then block
// by block in the chunk that differs.
func commonRun(a, b []int32, k int) int {
	b = b[:len(a)]
	for k+runChunk <= len(a) && sameInt32s(a[k:k+runChunk], b[k:k+runChunk]) {
		k += runChunk
	}
	for k < len(a) && a[k] == b[k] {
		k++
	}
	return k
}

// runChunk is commonRun's compare width: 256 bytes of block ids.
const runChunk = 64

// sameInt32s reports whether a and b (of equal length) hold the same values, compared as memory.
func sameInt32s(a, b []int32) bool {
	return unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(a))), 4*len(a)) ==
		unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(b))), 4*len(b))
}

// extended is s with length n ≥ len(s), its contents kept.
func extended[T any](s []T, n int) []T {
	return slices.Grow(s, n-len(s))[:n]
}
