package data

import "tau2rl/lib/assets"

// The errors of this package, matched with errors.Is:
//
//   - ErrNotFound: no τ² data directory (or version directory) was found; it is
//     assets.ErrNotFound, so one check covers every asset.
var (
	// ErrNotFound is returned (wrapped) by Dir when no data directory is found; it is
	// assets.ErrNotFound.
	ErrNotFound = assets.ErrNotFound
)
