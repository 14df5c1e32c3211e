package logs_test

import (
	"bytes"
	"log/slog"
	"testing"

	"tau2rl/lib/logs"
)

func TestOrDiscard(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	if got := logs.OrDiscard(l); got != l {
		t.Fatal("a logger was replaced")
	}
	d := logs.OrDiscard(nil)
	if d == nil || d.Enabled(t.Context(), slog.LevelError) {
		t.Fatalf("nil: got %v, want a logger that discards even errors", d)
	}
	d.Error("dropped") // must not panic
}
