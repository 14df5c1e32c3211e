package cpu

import (
	"runtime"
	"sync"
)

// float is the element type of every operation: float32 in the backend, float64 in gradient tests.
type float interface{ ~float32 | ~float64 }

// workers is how many goroutines an operation splits its rows over.
var workers = runtime.GOMAXPROCS(0)

// parallelFor calls f on contiguous sub-ranges of [0,n) covering it exactly once, concurrently
// when each part would hold at least grain items. f must only write state owned by its range.
func parallelFor(n, grain int, f func(lo, hi int)) {
	parallelForPart(n, grain, func(_, lo, hi int) { f(lo, hi) })
}

// numParts is how many parts parallelForPart splits n items into (at least 1).
func numParts(n, grain int) int {
	if grain < 1 {
		grain = 1
	}
	return max(1, min(workers, n/grain))
}

// parallelForPart is parallelFor that also tells f its part number in [0, numParts(n, grain)), so
// parts can reduce into their own partial sums without locks.
func parallelForPart(n, grain int, f func(part, lo, hi int)) {
	parts := numParts(n, grain)
	if parts == 1 {
		if n > 0 {
			f(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(p, lo, hi)
		}()
	}
	wg.Wait()
}

// minPartWork is about how many multiply-adds make a goroutine worth starting (tests lower it to
// force the parallel paths on tiny shapes).
var minPartWork = 1 << 15

// grainFor is the number of items per goroutine that makes splitting worth its cost, given the
// multiply-adds one item takes.
func grainFor(workPerItem int) int { return max(1, minPartWork/max(1, workPerItem)) }

// dot is Σ a[i]·b[i] over len(a), unrolled by four (the reference's only hot loop).
func dot[T float](a, b []T) T {
	b = b[:len(a)]
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy does y += a·x.
func axpy[T float](a T, x, y []T) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}
