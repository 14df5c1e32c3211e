package episode

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrContextWindow: the prompt leaves no room to generate; the episode ends with τ²'s
//     context_window_exceeded.
//   - ErrNotEvaluated: a reward-basis component could not be evaluated; no reward is recorded.
var (
	// ErrContextWindow means the prompt leaves no room for generation within
	// the engine's context: the episode ends with τ²'s context_window_exceeded.
	ErrContextWindow = errors.New("episode: prompt exceeds the context window")

	// ErrNotEvaluated is returned when a reward-basis component could not be
	// evaluated (NL_ASSERTION without a judge): there is no reward to record.
	ErrNotEvaluated = errors.New("episode: reward not evaluated")
)
