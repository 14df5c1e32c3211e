package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/tau2/tau2test"
)

// TestGradeFixture regrades the evaluator's fixture results file end to
// end: the output parses, keeps the unknown fields and the report shows
// pass^k and the agreement with the file's (partly stale) rewards.
func TestGradeFixture(t *testing.T) {
	tau2test.DataDir(t)
	out := filepath.Join(t.TempDir(), "regraded.json")
	cfg := DefaultGradeConfig()
	cfg.Input = filepath.Join("..", "evaluator", "testdata", "results_mock.json")
	cfg.Output = out
	var buf bytes.Buffer
	if err := Grade(context.Background(), &cfg, &buf, deps()); err != nil {
		t.Fatal(err)
	}
	report := buf.String()
	for _, want := range []string{"domain mock: 3 simulations", "regraded: avg reward", "pass^1", "agreement: 0/1 simulations agree", "1 differ, 2 without a reward in the file", "task create_task_1 trial 0", ": 0 -> 1"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"x_extra": 1`) || !strings.Contains(string(b), `"kept": [`) {
		t.Error("unknown fields lost")
	}
}
