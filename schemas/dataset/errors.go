package dataset

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrCorruptFile: a Parquet file the library cannot read (wrapped with its path).
var (
	// ErrCorruptFile wraps failures of the Parquet library on malformed files.
	ErrCorruptFile = errors.New("corrupt parquet file")
)
