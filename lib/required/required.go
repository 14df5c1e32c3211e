// Package required marks the configuration errors that only say a key has no value yet (a
// dataset to replay, the user simulator's URL, a model to train), as opposed to a value that is
// wrong. The distinction is what lets `--print-config` print a configuration that is not complete
// yet and list what is still to set (exit status 0), while a wrong value stays a usage error
// (exit status 2): a new user's first `BINARY --print-config` should show the defaults, not fail.
//
// A validator wraps ErrMissing where it would have written "required", keeping its message:
//
//	fmt.Errorf("replay: dataset is %w", required.ErrMissing)   // "replay: dataset is required"
//
// The package imports only the standard library so every configuration package can use it.
package required

import "errors"

// ErrMissing is wrapped by errors that say a key is not set. Its text is "required".
var ErrMissing = errors.New("required")

// Only reports whether err is a non-nil error whose every leaf is ErrMissing: a tree of
// errors.Join and %w wrappers in which no branch says anything but "not set yet". An error that
// formats its cause with %v (no Unwrap) counts as a different error, so a validator that loses
// the chain errs on the side of "invalid".
func Only(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unwrap() []error }:
		n := 0
		for _, c := range e.Unwrap() {
			if c == nil {
				continue
			}
			if !Only(c) {
				return false
			}
			n++
		}
		return n > 0
	case interface{ Unwrap() error }:
		return Only(e.Unwrap())
	default:
		return err == ErrMissing
	}
}
