package chattemplate

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrOrder: History methods called out of turn.
var (
	// ErrOrder is returned when History methods are called out of turn (two
	// completions without new messages, or messages while a prompt is pending).
	ErrOrder = errors.New("chattemplate: history calls out of order")
)
