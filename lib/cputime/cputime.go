// Package cputime is the process's CPU time (user + system, all threads), which the benchmarks
// report per operation beside the wall time: on a shared machine — CI's two cores, a box other
// jobs load — wall-clock figures swing with the other load, CPU time much less. CPU time does not
// show a gain from using more cores, which wall time on an idle machine does; report both.
package cputime

import (
	"testing"
	"time"
)

// Report adds the CPU time spent since since, per b.N operation, to b's results in unit
// (Milliseconds: "cpu-ms/op", Microseconds: "cpu-µs/op").
func Report(b *testing.B, since time.Duration, unit Unit) {
	per := float64(Now()-since) / float64(b.N)
	b.ReportMetric(per/float64(unit.d), unit.name)
}

// Unit is the scale Report writes its metric in.
type Unit struct {
	d    time.Duration
	name string
}

var (
	Milliseconds = Unit{time.Millisecond, "cpu-ms/op"}
	Microseconds = Unit{time.Microsecond, "cpu-µs/op"}
)
