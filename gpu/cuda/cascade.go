package cuda

// Shared-prefix (cascade) attention planning for the serving Decoder (issue 28); pure Go, so CI
// tests it without a GPU.

// cascadeMinGroup is the fewest decoding sequences sharing a cached prefix that get it read once
// for the group (cascade attention); a lone sequence reads its own blocks.
const cascadeMinGroup = 2

// keyRange is part of a decode token's cached keys: [lo, hi), read either by the token's own
// items or, when group ≥ 0, by the tensor-core items of a group of sequences sharing the blocks.
type keyRange struct{ lo, hi, group int }

// cascadeRanges finds, among decode tokens, the cached prefixes that several share: sequences
// are grouped by the physical block at block index from, and a group's longest common run of
// blocks (all of it visible to every member) becomes a shared range; the members then split
// again after it (a τ² step: the system prompt shared by all, then each task's opening by its
// samples). ranges[i] collects decode sequence i's ranges in key order; groups the members of
// each shared range.
func cascadeRanges(blocks [][]int32, keys []int, bs int, idx []int, from int, ranges [][]keyRange, groups *[][]int) {
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
		cascadeRanges(blocks, keys, bs, members, end, ranges, groups)
	}
}
