package cuda

import (
	"slices"

	"tau2rl/gpu"
)

// The serving Decoder's step planner (issue 28): plain Go over block tables and lengths, so it
// builds, is tested and is benchmarked without CUDA (BenchmarkPlanTau2); decoder.go only uploads
// what it lays out. A Decoder holds one planner and reuses its buffers every step.

// pagedRows is T2_PAGED_ROWS (csrc/t2cuda.h): the query rows of one paged-attention partial slot.
// decoder.go checks at compile time that the two agree.
const pagedRows = 16

// planKnobs is what the plan depends on besides the step: the model's GQA shape, the cache's
// block size, the chip's SM count and the kernel choices (Decoder.noMMA, ownMMA, itemsPerSM).
type planKnobs struct {
	g, nkv     int // query heads per KV head; KV heads
	blockSize  int
	sms        int
	itemsPerSM int
	noMMA      bool
	ownMMA     bool
}

// knobsFor is the planKnobs of a model and cache geometry on a chip of sms SMs.
func knobsFor(c gpu.Config, kv gpu.KVCacheSpec, sms, itemsPerSM int, noMMA, ownMMA bool) planKnobs {
	return planKnobs{g: c.NumAttentionHeads / c.NumKeyValueHeads, nkv: c.NumKeyValueHeads, blockSize: kv.BlockSize,
		sms: sms, itemsPerSM: itemsPerSM, noMMA: noMMA, ownMMA: ownMMA}
}

// stepPlan is a step's host-side index arrays. The planner that returns one reuses it (and its
// slices) for the next step.
type stepPlan struct {
	n                        int
	pure                     bool // decode tokens with context only: no FA2, items cover [0, Start]
	maxRows                  int  // the most query rows (tokens × GQA group) of a CUDA-core item
	tokens, positions, slots []int32
	send, tokInfo            []int32
	items, tables            []int32
	// mitems and mrows are the tensor-core paged kernel's items and their gathered rows
	// (t2_paged_attention_mma); nslots counts the partial slots of both kernels.
	mitems, mrows []int32
	nslots        int
	groups        int // shared (cascade) ranges
	rowIdx, topk  []int32
	fparams       []float32
	unif          []float64

	ints []int32 // items, mitems and mrows, in that order: their backing array (itemInts)
}

// itemInts is what the step uploads into ws.items: the CUDA-core items, then the tensor-core
// items, then their rows. planner.plan writes the three in place in this one buffer (no copy).
func (p *stepPlan) itemInts() []int32 { return p.ints }

// reset empties the plan, keeping its buffers.
func (p *stepPlan) reset() {
	*p = stepPlan{
		tokens: p.tokens[:0], positions: p.positions[:0], slots: p.slots[:0], send: p.send[:0],
		tokInfo: p.tokInfo[:0], items: p.items[:0], tables: p.tables[:0], mitems: p.mitems[:0],
		mrows: p.mrows[:0], rowIdx: p.rowIdx[:0], topk: p.topk[:0], fparams: p.fparams[:0],
		unif: p.unif[:0], ints: p.ints[:0],
	}
}

// planner lays steps out (plan). Everything it allocates is kept for the next step, so once the
// batch stops growing a step's plan allocates nothing. Not safe for concurrent use.
type planner struct {
	planKnobs
	p stepPlan

	keys    []int              // per sequence: the keys its paged items read
	dec     []int              // decode tokens with context, by index into the step
	ranges  [][]cascadeRange   // per sequence: its shared ranges in key order (cascade)
	groups  []cascadeGroup     // shared ranges, depth first (cascade)
	members []int              // the groups' members, groups[g].m0:m1
	mrange  []int32            // parallel to members: the member's index of the group's range in ranges[i]
	level   []cascadeLevelItem // cascade's per-level stack of distinct blocks
	slotOf  []int32            // by physical block id: 1 + its index in level, 0 when not at this level (4 bytes a pool block at most)
	dslots  []decSlots         // per sequence: its partial slots (decode tokens)
	tblOf   []int              // per sequence: its table's offset in p.tables
	rowOf   []int              // per sequence: its first row
	base    []sharedMember     // per member of the shared range being laid out
	// nItems and nMItems are the int32s of the step's CUDA-core and tensor-core items (layOut).
	nItems, nMItems int
	miscounts       int // steps whose layOut was wrong (tests check it stays 0)
}

// sharedMember is a member of a shared range as its items' rows need it: its partial slot for the
// range's first split of KV head 0, its splits per KV head, its row.
type sharedMember struct{ slot, splits, row int32 }

// decSlots is a decode token's partial slots: first, then splits per KV head (its shared ranges'
// splits in order, then its own range's).
type decSlots struct{ first, splits int }

// resized is s with length n, reusing its array when it is large enough (contents unspecified).
func resized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}

// plan lays the step out: sequences packed in order; FA2's subtree ends make each chunk causal
// within itself. Sequences with cached context get partials over it, merged by log-sum-exp:
//   - a prefill chunk (more than one tile of pagedRows/g tokens) runs on the tensor cores,
//     64 query rows (tokens × GQA group) per item;
//   - decode tokens of sequences that share cached prefix blocks (the prefix cache hands every
//     conversation of a τ² step the same system-prompt blocks) read each shared range once per
//     group, up to 64 rows (members × GQA group) per tensor-core item: cascade attention;
//   - what is left (a decode token's own blocks, a short chunk) runs on the CUDA-core kernel in
//     tiles of pagedRows/g tokens.
//
// Every key range is split so the step has about itemsPerSM items per SM.
//
// Cost: the block tables are read twice (the cascade grouping compares a shared run's blocks once
// per member; the tables are copied for upload), everything else is per sequence, per step token,
// per item and per gathered row — and the split keeps the items at about itemsPerSM·SMs however
// long the histories are. Nothing walks a sequence's tokens of history: a step of S sequences with
// B blocks in their tables costs O(B + S·depth + items + rows), allocation-free once the buffers
// have grown to the batch. The returned plan is the planner's own, valid until the next call.
func (pl *planner) plan(seqs []gpu.ServeSeq) *stepPlan {
	bs, g, nkv := pl.blockSize, pl.g, pl.nkv
	tileTok := pagedRows / g
	mma := pagedRows%g == 0 && !pl.noMMA
	p := &pl.p
	p.reset()
	p.pure = true
	for _, s := range seqs {
		p.n += len(s.Tokens)
		p.pure = p.pure && len(s.Tokens) == 1 && s.Start > 0
	}
	p.tokInfo = resized(p.tokInfo, 3*p.n)
	for i := range p.tokInfo {
		p.tokInfo[i] = -1
	}
	// The paged kernels' keys: the step's own come from FA2, or, without FA2 (pure), the token's
	// own key too, written to the cache first.
	pl.keys = resized(pl.keys, len(seqs))
	for i, s := range seqs {
		pl.keys[i] = s.Start
		if p.pure {
			pl.keys[i]++
		}
	}
	// Cascade: the decode tokens' shared prefixes.
	pl.dec = pl.dec[:0]
	for i, s := range seqs {
		if mma && len(s.Tokens) == 1 && s.Start > 0 {
			pl.dec = append(pl.dec, i)
		}
	}
	for len(pl.ranges) < len(seqs) {
		pl.ranges = append(pl.ranges, nil)
	}
	for i := range seqs {
		pl.ranges[i] = pl.ranges[i][:0]
	}
	pl.groups, pl.members, pl.mrange = pl.groups[:0], pl.members[:0], pl.mrange[:0]
	if len(pl.dec) >= cascadeMinGroup {
		pl.cascade(seqs, pl.dec, 0)
	}
	// Work (keys × query tiles × heads) sets the split, shared ranges counted once per group.
	var work int64
	for i, s := range seqs {
		if s.Start == 0 {
			continue
		}
		own := pl.keys[i]
		for _, r := range pl.ranges[i] {
			own -= r.hi - r.lo
		}
		work += int64((len(s.Tokens)+tileTok-1)/tileTok) * int64(nkv) * int64(own)
	}
	for _, gr := range pl.groups {
		work += int64(nkv) * int64(gr.hi-gr.lo) * int64(((gr.m1-gr.m0)*g+63)/64)
	}
	split := 64 * max(2, int((work/int64(max(1, pl.itemsPerSM)*max(1, pl.sms))+63)/64))
	nsplit := func(lo, hi int) int { return (hi - lo + split - 1) / split }
	pl.layOut(seqs, split, tileTok, mma)

	pl.dslots = resized(pl.dslots, len(seqs))
	pl.tblOf = resized(pl.tblOf, len(seqs))
	pl.rowOf = resized(pl.rowOf, len(seqs))
	for i, s := range seqs {
		r0 := len(p.tokens)
		pl.rowOf[i] = r0
		end := s.Start + len(s.Tokens)
		tbl := len(p.tables)
		pl.tblOf[i] = tbl
		p.tables = append(p.tables, s.Blocks[:(end+bs-1)/bs]...)
		for t, tok := range s.Tokens {
			pos := s.Start + t
			p.tokens = append(p.tokens, tok)
			p.positions = append(p.positions, int32(pos))
			p.slots = append(p.slots, s.Blocks[pos/bs]*int32(bs)+int32(pos%bs))
			p.send = append(p.send, int32(r0+len(s.Tokens)-1))
		}
		if s.Start > 0 {
			keys := pl.keys[i]
			rs := pl.ranges[i]
			switch {
			case len(rs) > 0 || pl.ownMMA && mma && len(s.Tokens) == 1: // a decode token: shared ranges, then its own
				first, splits, covered := p.nslots, 0, 0
				for j := range rs {
					rs[j].seg = splits
					splits += nsplit(rs[j].lo, rs[j].hi)
					covered = rs[j].hi
				}
				ownSeg := splits
				ownSplits := nsplit(covered, keys)
				splits += ownSplits
				p.nslots += nkv * splits
				pl.dslots[i] = decSlots{first, splits}
				p.tokInfo[3*r0], p.tokInfo[3*r0+1], p.tokInfo[3*r0+2] = int32(first), int32(splits), 0
				if ownSplits > 0 && pl.ownMMA {
					for h := range nkv {
						for k := range ownSplits {
							lo := covered + k*split
							slot := first + h*splits + ownSeg + k
							p.mitems = append(p.mitems, int32(g), int32(h), int32(lo), int32(min(keys, lo+split)), int32(tbl),
								int32(len(p.mrows)), 0, 0)
							for j := range g {
								p.mrows = append(p.mrows, int32(r0), int32(h*g+j), int32(slot*pagedRows+j))
							}
						}
					}
				} else if ownSplits > 0 {
					p.maxRows = max(p.maxRows, g)
					for h := range nkv {
						for k := range ownSplits {
							lo := covered + k*split
							p.items = append(p.items, int32(r0), 1, int32(h), int32(lo), int32(min(keys, lo+split)),
								int32(tbl), int32(first+h*splits+ownSeg+k), 0)
						}
					}
				}
			case mma && len(s.Tokens) > tileTok: // a prefill chunk: 64-row tensor-core items
				ns := nsplit(0, keys)
				ntiles := (len(s.Tokens) + tileTok - 1) / tileTok
				first := p.nslots
				p.nslots += ntiles * nkv * ns
				info := p.tokInfo[3*r0 : 3*(r0+len(s.Tokens))]
				for t0 := 0; t0 < len(s.Tokens); t0 += tileTok { // token t: tile t/tileTok, row (t%tileTok)·g
					slot0 := int32(first + t0/tileTok*nkv*ns)
					for t := range min(tileTok, len(s.Tokens)-t0) {
						info[3*(t0+t)], info[3*(t0+t)+1], info[3*(t0+t)+2] = slot0, int32(ns), int32(t*g)
					}
				}
				tokPerItem := 64 / g // a whole number of tiles (g divides pagedRows)
				for t0 := 0; t0 < len(s.Tokens); t0 += tokPerItem {
					nt := min(tokPerItem, len(s.Tokens)-t0)
					for h := range nkv {
						for k := range ns {
							lo := k * split
							r := len(p.mrows)
							p.mitems = append(p.mitems, int32(nt*g), int32(h), int32(lo), int32(min(keys, lo+split)), int32(tbl),
								int32(r), 0, 0)
							p.mrows = extended(p.mrows, r+3*nt*g)
							rows := p.mrows[r:]
							for tt := t0; tt < t0+nt; tt += tileTok { // a tile: its slot's rows in token order
								dst := int32((first + tt/tileTok*nkv*ns + h*ns + k) * pagedRows)
								for t := tt; t < min(t0+nt, tt+tileTok); t++ {
									for j := range g {
										rows[0], rows[1], rows[2] = int32(r0+t), int32(h*g+j), dst
										rows = rows[3:]
										dst++
									}
								}
							}
						}
					}
				}
			default: // CUDA-core tiles of tileTok tokens
				ns := nsplit(0, keys)
				for t0 := 0; t0 < len(s.Tokens); t0 += tileTok {
					nt := min(tileTok, len(s.Tokens)-t0)
					p.maxRows = max(p.maxRows, nt*g)
					first := p.nslots
					for h := range nkv {
						for k := range ns {
							lo := k * split
							p.items = append(p.items, int32(r0+t0), int32(nt), int32(h), int32(lo),
								int32(min(keys, lo+split)), int32(tbl), int32(p.nslots), 0)
							p.nslots++
						}
					}
					for t := range nt {
						r := r0 + t0 + t
						p.tokInfo[3*r], p.tokInfo[3*r+1], p.tokInfo[3*r+2] = int32(first), int32(ns), int32(t*g)
					}
				}
			}
		}
		if s.Sample {
			p.rowIdx = append(p.rowIdx, int32(r0+len(s.Tokens)-1))
			p.fparams = append(p.fparams, s.Params.Temperature, s.Params.TopP, s.Params.MinP)
			p.topk = append(p.topk, s.Params.TopK)
			p.unif = append(p.unif, s.Uniform)
		}
	}
	p.groups = len(pl.groups)
	// The shared ranges' items: members in chunks of 64/g, each range split like the rest; a
	// member's rows go to its own partial slots for the range (its first slot + the range's
	// segment, per KV head and split).
	per := 64 / g
	for _, gr := range pl.groups {
		members := pl.members[gr.m0:gr.m1]
		tbl := pl.tblOf[members[0]] // the shared blocks are the same in every member's table
		ns := nsplit(gr.lo, gr.hi)
		pl.base = resized(pl.base, len(members))
		for j, i := range members {
			pl.base[j] = sharedMember{slot: int32(pl.dslots[i].first + pl.ranges[i][pl.mrange[gr.m0+j]].seg),
				splits: int32(pl.dslots[i].splits), row: int32(pl.rowOf[i])}
		}
		for m0 := 0; m0 < len(members); m0 += per {
			chunk := pl.base[m0:min(len(members), m0+per)]
			for h := range nkv {
				for k := range ns {
					lo := gr.lo + k*split
					r := len(p.mrows)
					p.mitems = append(p.mitems, int32(len(chunk)*g), int32(h), int32(lo), int32(min(gr.hi, lo+split)), int32(tbl),
						int32(r), 0, 0)
					p.mrows = extended(p.mrows, r+3*g*len(chunk))
					rows := p.mrows[r:]
					q := int32(h * g)
					for _, m := range chunk {
						dst := (m.slot + int32(h)*m.splits + int32(k)) * pagedRows
						for j := range int32(g) {
							rows[0], rows[1], rows[2] = m.row, q+j, dst+j
							rows = rows[3:]
						}
					}
				}
			}
		}
	}
	// Each was given a capacity of exactly its count, so the lengths being the counts also says
	// no append outgrew its part of p.ints. Otherwise (layOut and the loops above disagree: a
	// bug, which TestPlanMatchesReference fails on) the step still gets the right arrays.
	if len(p.items) != pl.nItems || len(p.mitems) != pl.nMItems || len(p.mrows) != len(p.ints)-pl.nItems-pl.nMItems {
		pl.miscounts++
		p.ints = slices.Concat(p.items, p.mitems, p.mrows)
	}
	return p
}

// layOut sizes the step's items and rows (the counts plan's loops then produce) and points
// p.items, p.mitems and p.mrows, empty, at consecutive parts of p.ints with exactly that
// capacity, so plan appends them in place and the step uploads p.ints as it is.
func (pl *planner) layOut(seqs []gpu.ServeSeq, split, tileTok int, mma bool) {
	g, nkv := pl.g, pl.nkv
	nsplit := func(lo, hi int) int { return (hi - lo + split - 1) / split }
	var items, mitems, mrows int
	for i, s := range seqs {
		if s.Start == 0 {
			continue
		}
		keys, rs, nt := pl.keys[i], pl.ranges[i], len(s.Tokens)
		switch {
		case len(rs) > 0 || pl.ownMMA && mma && nt == 1:
			covered := 0
			if len(rs) > 0 {
				covered = rs[len(rs)-1].hi
			}
			if own := nsplit(covered, keys); pl.ownMMA {
				mitems += nkv * own
				mrows += nkv * own * g
			} else {
				items += nkv * own
			}
		case mma && nt > tileTok:
			ns := nsplit(0, keys)
			mitems += (nt + 64/g - 1) / (64 / g) * nkv * ns
			mrows += nt * g * nkv * ns
		default:
			items += (nt + tileTok - 1) / tileTok * nkv * nsplit(0, keys)
		}
	}
	for _, gr := range pl.groups {
		ns, m := nsplit(gr.lo, gr.hi), gr.m1-gr.m0
		mitems += (m + 64/g - 1) / (64 / g) * nkv * ns
		mrows += m * g * nkv * ns
	}
	p := &pl.p
	a, b := 8*items, 8*items+8*mitems
	pl.nItems, pl.nMItems = a, 8*mitems
	p.ints = resized(p.ints, b+3*mrows)
	p.items, p.mitems, p.mrows = p.ints[:0:a], p.ints[a:a:b], p.ints[b:b:len(p.ints)]
}
