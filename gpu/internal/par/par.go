// Package par splits an element-wise loop over n elements across the machine's cores. The
// checkpoint paths (safetensors conversions, the finiteness checks of gpu.Weights) run over
// billions of values: on one core a bf16↔fp32 pass over Qwen3-1.7B takes seconds, on sixteen a
// fraction of one (docs/PERFORMANCE.md, "Checkpoint I/O").
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Grain is the number of elements one task converts: large enough that scheduling costs nothing
// next to it, small enough that sixteen cores share a 300 M-element embedding evenly.
const Grain = 1 << 18

// For calls fn(lo, hi) over consecutive ranges covering [0, n), each at most Grain long, on up
// to GOMAXPROCS goroutines, and returns when all are done. A loop of fewer than 2·Grain
// elements runs on the calling goroutine. fn must be safe to run concurrently on disjoint
// ranges.
func For(n int, fn func(lo, hi int)) {
	workers := runtime.GOMAXPROCS(0)
	if n < 2*Grain || workers == 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	tasks := (n + Grain - 1) / Grain
	workers = min(workers, tasks)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				t := int(next.Add(1) - 1)
				if t >= tasks {
					return
				}
				lo := t * Grain
				fn(lo, min(lo+Grain, n))
			}
		})
	}
	wg.Wait()
}

// Any reports whether pred(lo, hi) is true for some range of For's split of [0, n). Ranges not
// yet started when one reports true are skipped.
func Any(n int, pred func(lo, hi int) bool) bool {
	var found atomic.Bool
	For(n, func(lo, hi int) {
		if !found.Load() && pred(lo, hi) {
			found.Store(true)
		}
	})
	return found.Load()
}
