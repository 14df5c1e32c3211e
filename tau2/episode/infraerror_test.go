package episode

import (
	"errors"
	"fmt"
	"testing"
)

// TestInfraErrorNamesTheStageOnce: a stage's own errors already start with its package's name,
// and the episode's message must not repeat it (issue 27 item 18: "episode: evaluator: evaluator:").
func TestInfraErrorNamesTheStageOnce(t *testing.T) {
	for _, tc := range []struct {
		stage string
		err   error
		want  string
	}{
		{StageEvaluator, fmt.Errorf("evaluator: NL judge: %w", errors.New("timeout")), "episode: evaluator: NL judge: timeout"},
		{StageEvaluator, errors.New("db hash mismatch"), "episode: evaluator: db hash mismatch"},
		{StagePolicy, errors.New("llm: 503"), "episode: policy_llm: llm: 503"},
		{StageEnvironment, errors.New("environmental: x"), "episode: environment: environmental: x"},
	} {
		if got := (&InfraError{Stage: tc.stage, Err: tc.err}).Error(); got != tc.want {
			t.Errorf("InfraError{%s, %q}.Error() = %q, want %q", tc.stage, tc.err, got, tc.want)
		}
	}
}
