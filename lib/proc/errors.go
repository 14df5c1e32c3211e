package proc

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrKilled: Stop found the process still running after its grace period and killed it.
var (
	// ErrKilled is returned (wrapped) by Stop when the process outlived its grace period.
	ErrKilled = errors.New("did not exit after SIGTERM; killed")
)
