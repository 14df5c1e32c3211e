//go:build unix

package cputime

import (
	"testing"
	"time"
)

// TestNowCountsWork: busy work on this goroutine shows as CPU time (within a generous wall-clock
// deadline, so a loaded machine slows the test rather than failing it).
func TestNowCountsWork(t *testing.T) {
	t0 := Now()
	x := 0
	for deadline := time.Now().Add(30 * time.Second); Now()-t0 < 10*time.Millisecond; x++ {
		if time.Now().After(deadline) {
			t.Fatalf("30 s of busy work counted %s of CPU time (x=%d)", Now()-t0, x)
		}
	}
}
