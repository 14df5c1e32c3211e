package seen

import (
	"fmt"
	"slices"
	"testing"
)

// TestSet: each case adds keys in order to a set of capacity n, then checks which keys are
// remembered and what Add reported.
func TestSet(t *testing.T) {
	cases := []struct {
		name     string
		n        int
		add      []string
		newAdds  []bool   // Add's result per key
		has      []string // remembered afterwards, in any order
		hasNot   []string
		wantSize int
	}{
		{name: "under capacity", n: 3, add: []string{"a", "b"}, newAdds: []bool{true, true}, has: []string{"a", "b"}, hasNot: []string{"c"}, wantSize: 2},
		{name: "exactly full", n: 3, add: []string{"a", "b", "c"}, newAdds: []bool{true, true, true}, has: []string{"a", "b", "c"}, wantSize: 3},
		{name: "oldest evicted first", n: 3, add: []string{"a", "b", "c", "d"}, newAdds: []bool{true, true, true, true},
			has: []string{"b", "c", "d"}, hasNot: []string{"a"}, wantSize: 3},
		{name: "wraps around the ring twice", n: 2, add: []string{"a", "b", "c", "d", "e"}, newAdds: []bool{true, true, true, true, true},
			has: []string{"d", "e"}, hasNot: []string{"a", "b", "c"}, wantSize: 2},
		{name: "re-adding keeps the first place (FIFO, not LRU)", n: 3, add: []string{"a", "b", "c", "a", "d"},
			newAdds: []bool{true, true, true, false, true}, has: []string{"b", "c", "d"}, hasNot: []string{"a"}, wantSize: 3},
		{name: "an evicted key is new again", n: 2, add: []string{"a", "b", "c", "a"}, newAdds: []bool{true, true, true, true},
			has: []string{"c", "a"}, hasNot: []string{"b"}, wantSize: 2},
		{name: "capacity one", n: 1, add: []string{"a", "a", "b"}, newAdds: []bool{true, false, true}, has: []string{"b"}, hasNot: []string{"a"}, wantSize: 1},
		{name: "zero remembers nothing", n: 0, add: []string{"a", "a"}, newAdds: []bool{false, false}, hasNot: []string{"a"}},
		{name: "negative is zero", n: -5, add: []string{"a"}, newAdds: []bool{false}, hasNot: []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New[string](c.n)
			var got []bool
			for _, k := range c.add {
				got = append(got, s.Add(k))
			}
			if !slices.Equal(got, c.newAdds) {
				t.Errorf("Add results %v, want %v", got, c.newAdds)
			}
			for _, k := range c.has {
				if !s.Has(k) {
					t.Errorf("forgot %q", k)
				}
			}
			for _, k := range c.hasNot {
				if s.Has(k) {
					t.Errorf("remembers %q", k)
				}
			}
			if s.Len() != c.wantSize {
				t.Errorf("Len %d, want %d", s.Len(), c.wantSize)
			}
		})
	}
}

// TestSetRemembersExactlyTheLastN: over many wraps, the set holds exactly the last n distinct keys
// added, never more, with array keys (the archiver's 16-byte ids).
func TestSetRemembersExactlyTheLastN(t *testing.T) {
	const n = 7
	s := New[[2]int](n)
	for i := range 100 {
		s.Add([2]int{i, i})
		if s.Len() != min(i+1, n) || s.Len() > s.Cap() {
			t.Fatalf("after %d adds Len %d", i+1, s.Len())
		}
		for j := 0; j <= i; j++ {
			if want := j > i-n; s.Has([2]int{j, j}) != want {
				t.Fatalf("after %d adds Has(%d) = %v, want %v", i+1, j, !want, want)
			}
		}
	}
}

func ExampleSet() {
	recent := New[string](2)
	for _, id := range []string{"t1", "t2", "t1", "t3", "t1"} {
		fmt.Println(id, recent.Add(id))
	}
	// Output:
	// t1 true
	// t2 true
	// t1 false
	// t3 true
	// t1 true
}
