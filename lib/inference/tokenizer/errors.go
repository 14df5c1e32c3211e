package tokenizer

import "tau2rl/lib/assets"

// The errors of this package, matched with errors.Is:
//
//   - ErrNotFound: no Qwen3 tokenizer directory was found; it is assets.ErrNotFound.
var (
	// ErrNotFound is returned (wrapped) by LocateQwen3 when no tokenizer directory
	// is found; it is assets.ErrNotFound.
	ErrNotFound = assets.ErrNotFound
)
