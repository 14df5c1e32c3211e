package rollout

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrRequestsDone: a finite request source (self-driven mode) has handed out every request.
var (
	// ErrRequestsDone is returned by a finite request source once every request was handed out; the
	// service then finishes the groups in flight and returns.
	ErrRequestsDone = errors.New("rollout: no more requests")
)
