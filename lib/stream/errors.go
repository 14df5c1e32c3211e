package stream

import "errors"

// The errors of this package, matched with errors.Is.
var (
	// ErrOverRelease is returned (wrapped, with the partition and offset) by Watermark.Release
	// and Done when a message is released more often than it was held: a bookkeeping bug in the
	// consumer, reported rather than letting the commit point pass work not done.
	ErrOverRelease = errors.New("stream: watermark: message released more often than held")
)
