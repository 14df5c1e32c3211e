package evaluator

import "errors"

// The errors of this package, matched with errors.Is:
//
//   - ErrEvaluation: the grading machinery failed; never a reward, an infrastructure error.
var (
	// ErrEvaluation wraps every failure of the grading machinery (malformed
	// trajectory, raising env function, strict-replay mismatch, judge failure).
	// Such a failure is never a reward: τ² records the simulation as an
	// infrastructure error.
	ErrEvaluation = errors.New("evaluator: evaluation failed")
)
