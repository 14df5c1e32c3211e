package localrun

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportRoundsFloats (issue 27 item 21): report.md prints pass^k and the per-step mismatch to
// three significant digits, like its other numbers, not as Go's shortest exact float.
func TestReportRoundsFloats(t *testing.T) {
	e := &experiment{cfg: DefaultExperimentConfig(), dir: t.TempDir(), out: io.Discard, start: time.Now()}
	e.rep.Before = EvalStats{Tasks: 13, Avg: 2.0 / 13, PassK: []float64{2.0 / 13, 1.0 / 39}}
	e.rep.After = EvalStats{Tasks: 13, Avg: 7.0 / 13, PassK: []float64{7.0 / 13, 0.3333333333333333}}
	e.rep.GRPO.MeanAbsDiff = []float64{0.0013698630136986301, 0.00041}
	e.rep.GRPO.CapFraction = []float64{0, 1.0 / 3}
	if err := e.writeReport(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{"pass^k [0.154 0.0256]", "pass^k [0.538 0.333]", "[0.00137 0.00041] [0 0.333]"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "0.1538461") || strings.Contains(md, "0.333333") {
		t.Errorf("report.md prints unrounded floats:\n%s", md)
	}
}
