package required

import (
	"errors"
	"fmt"
	"testing"
)

func TestOnly(t *testing.T) {
	missing := fmt.Errorf("replay: dataset is %w", ErrMissing)
	invalid := errors.New("rate must be > 0")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"the sentinel", ErrMissing, true},
		{"wrapped", missing, true},
		{"wrapped twice", fmt.Errorf("producer config: %w", fmt.Errorf("econfig: %w", missing)), true},
		{"joined missing", errors.Join(missing, fmt.Errorf("out is %w", ErrMissing)), true},
		{"join with nil members", errors.Join(nil, missing, nil), true},
		{"an invalid value", invalid, false},
		{"missing and invalid", errors.Join(missing, invalid), false},
		{"wrapped join with an invalid value", fmt.Errorf("config: %w", errors.Join(missing, invalid)), false},
		{"formatted with %v loses the mark", fmt.Errorf("config: %v", missing), false},
		{"two %w, one invalid", fmt.Errorf("%w: %w", invalid, missing), false},
		{"text alone is not the mark", errors.New("dataset is required"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Only(tt.err); got != tt.want {
				t.Fatalf("Only(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if missing.Error() != "replay: dataset is required" {
		t.Fatalf("the sentinel changed a message's text: %q", missing)
	}
}
