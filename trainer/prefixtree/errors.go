package prefixtree

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrEmptySequence: a sequence with no tokens was inserted.
//   - ErrTooLong: one sequence alone is longer than a micro-batch may be.
var (
	// ErrEmptySequence is returned when an empty sequence is inserted: a sequence with no tokens has
	// nothing to train and no leaf to stand for it.
	ErrEmptySequence = errors.New("prefixtree: empty sequence")

	// ErrTooLong is wrapped by Pack's error when one sequence alone exceeds max_tokens_per_mb.
	ErrTooLong = errors.New("sequence exceeds max_tokens_per_mb")
)
