package bench

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrUsage: a configuration that cannot run — an invalid value, task ids the split does not
//     have, nothing left to run, an unknown variant: the command's exit status 2.
var (
	// ErrUsage marks a configuration error.
	ErrUsage = errors.New("usage error")
)
