package sampler

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrClosed: a request reached an engine that has stopped.
var (
	// ErrClosed is returned for requests submitted to an engine that has stopped.
	ErrClosed = errors.New("sampler: engine stopped")
)
