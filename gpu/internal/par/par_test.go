package par

import (
	"sync"
	"testing"
)

// Every index is visited exactly once, for sizes below, at and above the parallel threshold.
func TestForCoversEachIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, Grain - 1, 2 * Grain, 2*Grain + 1, 7*Grain + 13} {
		seen := make([]int32, n)
		var mu sync.Mutex
		ranges := 0
		For(n, func(lo, hi int) {
			if lo >= hi || hi-lo > max(Grain, n) {
				t.Errorf("n=%d: bad range [%d,%d)", n, lo, hi)
			}
			for i := lo; i < hi; i++ {
				seen[i]++
			}
			mu.Lock()
			ranges++
			mu.Unlock()
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d: index %d visited %d times", n, i, c)
			}
		}
		if n == 0 && ranges != 0 {
			t.Errorf("n=0: fn called %d times", ranges)
		}
	}
}

func TestAny(t *testing.T) {
	n := 5*Grain + 3
	for _, at := range []int{-1, 0, Grain, n - 1} {
		got := Any(n, func(lo, hi int) bool { return at >= lo && at < hi })
		if got != (at >= 0) {
			t.Errorf("Any with the hit at %d = %v", at, got)
		}
	}
}
