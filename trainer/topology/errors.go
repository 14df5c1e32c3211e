package topology

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrSettings: settings this binary cannot run — a backend it was built without, parallel
//     settings the backend cannot honour, several hosts asked of a one-host command. A
//     configuration error (the command's exit status 2), found before any weights load.
var (
	// ErrSettings marks settings this binary cannot run.
	ErrSettings = errors.New("trainer settings")
)
