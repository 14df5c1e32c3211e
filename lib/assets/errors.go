package assets

import "errors"

// The errors of this package, matched with errors.Is; each is wrapped with the asset and where
// it was looked for:
//
//   - ErrNotFound: an asset could not be resolved (not configured, not cached, download off
//     or failed); data.ErrNotFound and tokenizer.ErrNotFound are this error.
//   - ErrChecksum: a downloaded file does not match its pinned checksum.
var (
	// ErrNotFound is wrapped by every resolution failure.
	ErrNotFound = errors.New("asset not found")

	// ErrChecksum is wrapped when a downloaded file does not match its pin.
	ErrChecksum = errors.New("checksum mismatch")
)
