package cuda

import "tau2rl/gpu"

// The step planner as it was before it moved out of decoder.go (issue 28), kept verbatim apart
// from the Decoder's fields becoming planKnobs: TestPlanMatchesReference pins the new planner's
// plans to it item for item, and BenchmarkPlanTau2's "before" rows run it.

// keyRange is part of a decode token's cached keys: [lo, hi), read either by the token's own
// items or, when group ≥ 0, by the tensor-core items of a group of sequences sharing the blocks.
type keyRange struct{ lo, hi, group int }

// cascadeRangesRef finds, among decode tokens, the cached prefixes that several share: sequences
// are grouped by the physical block at block index from, and a group's longest common run of
// blocks (all of it visible to every member) becomes a shared range; the members then split
// again after it (a τ² step: the system prompt shared by all, then each task's opening by its
// samples). ranges[i] collects decode sequence i's ranges in key order; groups the members of
// each shared range.
func cascadeRangesRef(blocks [][]int32, keys []int, bs int, idx []int, from int, ranges [][]keyRange, groups *[][]int) {
	var order []int32
	byBlock := map[int32][]int{}
	for _, i := range idx {
		if (from+1)*bs > keys[i] || from >= len(blocks[i]) {
			continue
		}
		b := blocks[i][from]
		if _, ok := byBlock[b]; !ok {
			order = append(order, b)
		}
		byBlock[b] = append(byBlock[b], i)
	}
	for _, b := range order {
		members := byBlock[b]
		if len(members) < cascadeMinGroup {
			continue
		}
		end := from + 1
		for ok := true; ok; {
			for _, i := range members {
				if (end+1)*bs > keys[i] || end >= len(blocks[i]) || blocks[i][end] != blocks[members[0]][end] {
					ok = false
					break
				}
			}
			if ok {
				end++
			}
		}
		g := len(*groups)
		*groups = append(*groups, members)
		for _, i := range members {
			ranges[i] = append(ranges[i], keyRange{from * bs, end * bs, g})
		}
		cascadeRangesRef(blocks, keys, bs, members, end, ranges, groups)
	}
}

func planRef(kn planKnobs, seqs []gpu.ServeSeq) stepPlan {
	bs := kn.blockSize
	g := kn.g
	nkv := kn.nkv
	tileTok := pagedRows / g
	mma := pagedRows%g == 0 && !kn.noMMA
	var p stepPlan
	for _, s := range seqs {
		p.n += len(s.Tokens)
	}
	p.pure = true
	for _, s := range seqs {
		p.pure = p.pure && len(s.Tokens) == 1 && s.Start > 0
	}
	p.tokInfo = make([]int32, 3*p.n)
	for i := range p.tokInfo {
		p.tokInfo[i] = -1
	}
	keysOf := func(s gpu.ServeSeq) int { // the paged kernels' keys; the step's own come from FA2 …
		if p.pure {
			return s.Start + 1 // … or, without FA2, the token's own key, written to the cache first
		}
		return s.Start
	}
	// Cascade: the decode tokens' shared prefixes.
	var dec []int // indices into seqs of decode tokens with context
	for i, s := range seqs {
		if mma && len(s.Tokens) == 1 && s.Start > 0 {
			dec = append(dec, i)
		}
	}
	ranges := make([][]keyRange, len(seqs))
	var groups [][]int
	if len(dec) >= cascadeMinGroup {
		blocks := make([][]int32, len(seqs))
		keys := make([]int, len(seqs))
		for _, i := range dec {
			blocks[i], keys[i] = seqs[i].Blocks, keysOf(seqs[i])
		}
		cascadeRangesRef(blocks, keys, bs, dec, 0, ranges, &groups)
	}
	// Work (keys × query tiles × heads) sets the split, shared ranges counted once per group.
	var work int64
	for i, s := range seqs {
		if s.Start == 0 {
			continue
		}
		own := keysOf(s)
		for _, r := range ranges[i] {
			own -= r.hi - r.lo
		}
		work += int64((len(s.Tokens)+tileTok-1)/tileTok) * int64(nkv) * int64(own)
	}
	sharedWork := map[int]int{}
	for i := range seqs {
		for _, r := range ranges[i] {
			sharedWork[r.group] = r.hi - r.lo
		}
	}
	for gi, k := range sharedWork {
		work += int64(nkv) * int64(k) * int64((len(groups[gi])*g+63)/64)
	}
	split := 64 * max(2, int((work/int64(max(1, kn.itemsPerSM)*max(1, kn.sms))+63)/64))
	nsplit := func(lo, hi int) int { return (hi - lo + split - 1) / split }
	// slotOf[i]: decode sequence i's first partial slot and its segments' first split index per
	// range (shared ranges in order, then its own range).
	type decSlots struct {
		first, splits int
		segStart      []int
	}
	dslots := make([]decSlots, len(seqs))
	tblOf := make([]int, len(seqs))
	rowOf := make([]int, len(seqs))
	for i, s := range seqs {
		r0 := len(p.tokens)
		rowOf[i] = r0
		end := s.Start + len(s.Tokens)
		tbl := len(p.tables)
		tblOf[i] = tbl
		p.tables = append(p.tables, s.Blocks[:(end+bs-1)/bs]...)
		for t, tok := range s.Tokens {
			pos := s.Start + t
			p.tokens = append(p.tokens, tok)
			p.positions = append(p.positions, int32(pos))
			p.slots = append(p.slots, s.Blocks[pos/bs]*int32(bs)+int32(pos%bs))
			p.send = append(p.send, int32(r0+len(s.Tokens)-1))
		}
		if s.Start > 0 {
			keys := keysOf(s)
			switch {
			case len(ranges[i]) > 0 || kn.ownMMA && mma && len(s.Tokens) == 1: // a decode token: shared ranges, then its own
				ds := decSlots{first: p.nslots}
				covered := 0
				for _, r := range ranges[i] {
					ds.segStart = append(ds.segStart, ds.splits)
					ds.splits += nsplit(r.lo, r.hi)
					covered = r.hi
				}
				ownSplits := nsplit(covered, keys)
				ds.segStart = append(ds.segStart, ds.splits)
				ds.splits += ownSplits
				p.nslots += nkv * ds.splits
				dslots[i] = ds
				p.tokInfo[3*r0], p.tokInfo[3*r0+1], p.tokInfo[3*r0+2] = int32(ds.first), int32(ds.splits), 0
				if ownSplits > 0 && kn.ownMMA {
					for h := range nkv {
						for k := range ownSplits {
							lo := covered + k*split
							slot := ds.first + h*ds.splits + ds.segStart[len(ds.segStart)-1] + k
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
								int32(tbl), int32(ds.first+h*ds.splits+ds.segStart[len(ds.segStart)-1]+k), 0)
						}
					}
				}
			case mma && len(s.Tokens) > tileTok: // a prefill chunk: 64-row tensor-core items
				ns := nsplit(0, keys)
				ntiles := (len(s.Tokens) + tileTok - 1) / tileTok
				first := p.nslots
				p.nslots += ntiles * nkv * ns
				for t := range s.Tokens {
					ti := t / tileTok
					r := r0 + t
					p.tokInfo[3*r], p.tokInfo[3*r+1], p.tokInfo[3*r+2] = int32(first+ti*nkv*ns), int32(ns), int32((t%tileTok)*g)
				}
				tokPerItem := 64 / g
				for t0 := 0; t0 < len(s.Tokens); t0 += tokPerItem {
					nt := min(tokPerItem, len(s.Tokens)-t0)
					for h := range nkv {
						for k := range ns {
							lo := k * split
							p.mitems = append(p.mitems, int32(nt*g), int32(h), int32(lo), int32(min(keys, lo+split)), int32(tbl),
								int32(len(p.mrows)), 0, 0)
							for t := t0; t < t0+nt; t++ {
								slot := first + (t/tileTok)*nkv*ns + h*ns + k
								for j := range g {
									p.mrows = append(p.mrows, int32(r0+t), int32(h*g+j),
										int32(slot*pagedRows+(t%tileTok)*g+j))
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
	p.groups = len(groups)
	// The shared ranges' items: members in chunks of 64/g, each range split like the rest.
	for gi, members := range groups {
		var kr keyRange
		seg := -1
		for si, r := range ranges[members[0]] {
			if r.group == gi {
				kr, seg = r, si
			}
		}
		tbl := tblOf[members[0]] // the shared blocks are the same in every member's table
		per := 64 / g
		for m0 := 0; m0 < len(members); m0 += per {
			chunk := members[m0:min(len(members), m0+per)]
			for h := range nkv {
				for k := range nsplit(kr.lo, kr.hi) {
					lo := kr.lo + k*split
					p.mitems = append(p.mitems, int32(len(chunk)*g), int32(h), int32(lo), int32(min(kr.hi, lo+split)), int32(tbl),
						int32(len(p.mrows)), 0, 0)
					for _, i := range chunk {
						ds := dslots[i]
						// the member's segment index of this range (ranges are in the same order for
						// all members up to this one)
						mseg := seg
						for si, r := range ranges[i] {
							if r.group == gi {
								mseg = si
							}
						}
						slot := ds.first + h*ds.splits + ds.segStart[mseg] + k
						for j := range g {
							p.mrows = append(p.mrows, int32(rowOf[i]), int32(h*g+j), int32(slot*pagedRows+j))
						}
					}
				}
			}
		}
	}
	return p
}
