package llm

import (
	"context"
	"errors"
	"fmt"

	"tau2rl/lib/redact"
)

// Error kinds, matched with errors.Is. Every error the clients return wraps
// exactly one of them, or a context error when the caller's context ended.
var (
	// ErrUnavailable: no usable answer after all retries — connection
	// failures, timeouts, HTTP 429 and 5xx. An infrastructure failure: never
	// to be recorded as a reward.
	ErrUnavailable = errors.New("llm: server unavailable")
	// ErrRejected: the server refused the request with a 4xx other than 429
	// (bad parameters, prompt longer than the context). Not retried.
	ErrRejected = errors.New("llm: request rejected")
	// ErrBadResponse: a 2xx answer that could not be decoded or breaks the
	// wire format (e.g. log-probs that do not match the output ids).
	ErrBadResponse = errors.New("llm: bad response")
)

// Error describes a failed call. Unwrap yields both its kind (one of the
// sentinels above, or nil for a cancelled context) and its cause.
type Error struct {
	Endpoint string // metrics name of the endpoint
	Op       string // generate, completions, chat, update_weights, …
	Status   int    // last HTTP status, 0 if none
	Attempts int    // HTTP attempts made
	Kind     error  // ErrUnavailable, ErrRejected, ErrBadResponse, or nil
	Err      error  // cause
	Body     string // start of the last response body (redacted), for diagnostics
}

// Error describes the failure with credentials redacted (lib/redact): servers and proxies echo
// requests in their error bodies, and this text ends up in results files (info.error), the
// trajectories' error column and logs.
func (e *Error) Error() string {
	s := fmt.Sprintf("llm: %s %s", e.Endpoint, e.Op)
	if e.Kind != nil {
		s += ": " + e.Kind.Error()
	}
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d", e.Status)
		if e.Attempts > 1 {
			s += fmt.Sprintf(", %d attempts", e.Attempts)
		}
		s += ")"
	} else if e.Attempts > 1 {
		s += fmt.Sprintf(" (%d attempts)", e.Attempts)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Body != "" {
		s += ": " + e.Body
	}
	return redact.String(s)
}

// Unwrap returns the kind and the cause.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, 2)
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// IsInfrastructure reports whether err is an infrastructure failure (the
// server could not be reached or did not answer, or the call was cancelled
// or timed out) rather than a bad request or a bad answer.
func IsInfrastructure(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
