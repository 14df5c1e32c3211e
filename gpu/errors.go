package gpu

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrKVGeometry: a KV-cache spec that cannot be built for the model and memory given.
var (
	// ErrKVGeometry is returned when a KV-cache spec cannot be built.
	ErrKVGeometry = errors.New("gpu: invalid KV-cache geometry")
)
