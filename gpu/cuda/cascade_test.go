package cuda

import (
	"slices"
	"testing"

	"tau2rl/gpu"
)

// TestCascadeRanges checks the shared-prefix grouping on block tables alone: who shares what,
// nested groups, ranges limited to full blocks every member sees, lone sequences left out.
func TestCascadeRanges(t *testing.T) {
	bs := 4
	blocks := [][]int32{
		{1, 2, 3, 10, 11}, // a: shares 1,2,3 with b, c; 10 with b
		{1, 2, 3, 10, 12}, // b
		{1, 2, 3, 20},     // c
		{1, 2, 30},        // d: shares 1,2 with a, b, c
		{5, 6},            // e: shares nothing
		{1, 2, 3, 10, 11}, // f: same table as a but sees only 13 keys (block 3 partly)
	}
	keys := []int{20, 20, 16, 10, 8, 13}
	seqs := make([]gpu.ServeSeq, len(blocks))
	for i := range seqs {
		seqs[i].Blocks = blocks[i]
	}
	pl := &planner{planKnobs: planKnobs{blockSize: bs}, keys: keys, ranges: make([][]cascadeRange, len(blocks))}
	pl.cascade(seqs, []int{0, 1, 2, 3, 4, 5}, 0)
	groups := pl.groups
	for g, gr := range groups {
		for j, i := range pl.members[gr.m0:gr.m1] {
			if r := pl.ranges[i][pl.mrange[gr.m0+j]]; r.group != g || r.lo != gr.lo || r.hi != gr.hi {
				t.Errorf("group %d member %d: range %+v, group %+v", g, i, r, gr)
			}
		}
	}
	if len(pl.level) != 0 || slices.ContainsFunc(pl.slotOf, func(k int32) bool { return k != 0 }) {
		t.Errorf("cascade left its per-level buckets dirty: level %v", pl.level)
	}
	want := map[int][][2]int{
		0: {{0, 8}, {8, 12}, {12, 16}}, 1: {{0, 8}, {8, 12}, {12, 16}}, 2: {{0, 8}, {8, 12}}, 3: {{0, 8}},
		5: {{0, 8}, {8, 12}},
	}
	for i := range blocks {
		var got [][2]int
		for _, r := range pl.ranges[i] {
			got = append(got, [2]int{r.lo, r.hi})
		}
		if !slices.Equal(got, want[i]) {
			t.Errorf("sequence %d: ranges %v, want %v (groups %v)", i, got, want[i], groups)
		}
	}
}
