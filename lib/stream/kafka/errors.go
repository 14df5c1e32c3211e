package kafka

import "errors"

// The errors of this package, matched with errors.Is or errors.As. Every error is wrapped with
// the topic or group and the operation; besides these, readers return the caller's ctx.Err()
// when the context ends and io.EOF once closed.
var (
	// ErrMessageTooLarge is returned (wrapped, with the sizes) when a message is larger than
	// Config.MaxMessageBytes, or the broker refuses it as too large. The message is not sent;
	// the producers split groups and the archiver dead-letters oversize input to stay under it.
	ErrMessageTooLarge = errors.New("kafka: message too large")
)

// TopicAuthorizationError (errors.As) reports topics the principal may not describe or create,
// from EnsureTopics, with the ACLs an operator has to grant.
var _ error = (*TopicAuthorizationError)(nil)
