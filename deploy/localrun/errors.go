package localrun

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrUsage: a configuration that names something the τ² data does not have (a domain
//     without tasks, task ids outside the split, no task gradable here): the command's exit
//     status 2, reported before any process starts.
var (
	// ErrUsage marks a configuration error found while preparing a run.
	ErrUsage = errors.New("configuration")
)
