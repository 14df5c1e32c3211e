package localrun

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/schemas/report"
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

// TestReportSaysWhereEpisodesWent: report.md has the accounting table (trained and each reason,
// with shares) and the per task diagnosis with its total row.
func TestReportSaysWhereEpisodesWent(t *testing.T) {
	e := &experiment{cfg: DefaultExperimentConfig(), dir: t.TempDir(), out: io.Discard, start: time.Now()}
	e.rep.GRPO.Accounting = report.Accounting{Produced: 40, Trained: 16, TrainedShare: 0.4, DuplicateCopies: 2,
		Discarded: map[string]int{"filtered_equal_rewards": 16, report.InFlightAtEnd: 6, "stale": 2}}
	e.rep.GRPO.Diagnosis = report.Diagnosis{
		Tasks: []report.Cell{{Task: "airline/1", Episodes: 24, Success: 0.5, Groups: 3, EqualGroups: 1, Failures: map[string]int{"db": 12}}},
		Total: report.Cell{Task: report.AllTasks, Episodes: 24, Success: 0.5, Groups: 3, EqualGroups: 1, Failures: map[string]int{"db": 12}},
	}
	if err := e.writeReport(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{"Where the 40 produced episodes", "| trained on | 16 | 40.0% |", "| discarded: filtered equal rewards | 16 | 40.0% |",
		"| discarded: in flight at end | 6 | 15.0% |", "| discarded: stale | 2 | 5.0% |", "2 duplicate copies",
		"| airline/1 | 24 | 0.500 | 3 | 1 |", "| all | 24 |", "db 12"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}
