//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Now is the process's user + system CPU time so far (0 where getrusage fails).
func Now() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
