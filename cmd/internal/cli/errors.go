package cli

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrUsage: a command-line or configuration error, exit status 2 (Usage wraps an error in it).
var (
	// ErrUsage marks a command-line error; Main exits with status 2 for it.
	ErrUsage = errors.New("usage error")
)
