package figures

import (
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var runReports = []string{
	filepath.Join("testdata", "runs", "20261128-0901-seed1", "report.json"),
	filepath.Join("testdata", "runs", "20261128-0930-seed2", "report.json"),
	filepath.Join("testdata", "runs", "20261128-1002-seed3", "report.json"),
}

func ptr(v float64) *float64 { return &v }

// TestAcrossRuns: the mean, min and max of the runs' mean reward per version, over the runs that
// reached the version.
func TestAcrossRuns(t *testing.T) {
	runs := []Run{
		{Reward: []Point{{X: 0, Y: 0.2}, {X: 1, Y: 0.4}, {X: 2, Y: 0.9}}},
		{Reward: []Point{{X: 0, Y: 0.4}, {X: 1, Y: 0.8}}},
		{Reward: []Point{{X: 0, Y: 0.3}, {X: 1, Y: 0.6}}},
	}
	want := []Band{
		{Version: 0, Mean: 0.3, Min: 0.2, Max: 0.4, Runs: 3},
		{Version: 1, Mean: 0.6, Min: 0.4, Max: 0.8, Runs: 3},
		{Version: 2, Mean: 0.9, Min: 0.9, Max: 0.9, Runs: 1},
	}
	got := AcrossRuns(runs)
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Version != w.Version || g.Runs != w.Runs || math.Abs(g.Mean-w.Mean) > 1e-12 || g.Min != w.Min || g.Max != w.Max {
			t.Errorf("version %v: %+v, want %+v", w.Version, g, w)
		}
	}
}

// TestSummarize: per-run pass^1 and pass^k, and their spread over the runs that measured them
// (a run evaluated with 2 trials has no pass^4, one without evaluations has neither).
func TestSummarize(t *testing.T) {
	runs := []Run{
		{Label: "a", Before: []float64{0.3, 0.2, 0.1, 0.05}, After: []float64{0.9, 0.8, 0.7, 0.6}, Demo: ptr(0.4)},
		{Label: "b", Before: []float64{0.1, 0.05}, After: []float64{0.7, 0.5}, Demo: ptr(0.5)},
		{Label: "c"},
	}
	s := Summarize(runs, 4)
	if s.K != 4 || len(s.Runs) != 3 {
		t.Fatalf("%+v", s)
	}
	if s.Runs[1].PassKAfter != nil || s.Runs[2].Pass1After != nil || *s.Runs[1].Pass1After != 0.7 {
		t.Errorf("per run %+v", s.Runs)
	}
	if p := s.Pass1After; p.Runs != 2 || math.Abs(p.Mean-0.8) > 1e-12 || p.Min != 0.7 || p.Max != 0.9 {
		t.Errorf("pass^1 after %+v", p)
	}
	if p := s.PassKAfter; p.Runs != 1 || p.Mean != 0.6 || p.Min != 0.6 || p.Max != 0.6 {
		t.Errorf("pass^4 after %+v", p)
	}
	if d := s.Demo; d.Runs != 2 || math.Abs(d.Mean-0.45) > 1e-12 {
		t.Errorf("demonstrator %+v", d)
	}
	md := s.Markdown()
	if !strings.Contains(md, "| c | – | – | – | – | – |") || !strings.Contains(md, "| **max** (3 runs) | 0.500 | 0.300 | 0.900 | 0.050 | 0.600 |") {
		t.Errorf("markdown:\n%s", md)
	}
}

// TestRunsSummaryGolden draws three runs' report.json files (testdata/runs) and compares the
// summary files with their goldens; the figures name every run, the mean, the band and the
// demonstrators' mean success, and the pass^k figure every bar.
func TestRunsSummaryGolden(t *testing.T) {
	runs, err := FromReports(runReports, 4)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Label != "seed 1 · 20261128-0901-seed1" || runs[2].Seed != 3 || len(runs[2].Reward) != 3 {
		t.Fatalf("runs %+v", runs)
	}
	dir := t.TempDir()
	files, err := DrawRuns(dir, runs, 4, Options{Formats: []string{"svg"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"runs_reward.svg", "runs_passk.svg", "runs_summary.json", "runs_summary.md"}
	if len(files) != len(want) {
		t.Fatalf("files %v", files)
	}
	for i, f := range files {
		if filepath.Base(f) != want[i] {
			t.Fatalf("files %v, want %v", files, want)
		}
	}
	for _, name := range []string{"runs_summary.json", "runs_summary.md"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata", "runs", strings.Replace(name, "runs_summary", "runs_summary.golden", 1))
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		exp, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(exp) {
			t.Errorf("%s differs from %s:\n%s", name, golden, got)
		}
	}
	var s RunsSummary
	b, _ := os.ReadFile(filepath.Join(dir, "runs_summary.json"))
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Pass1After.Runs != 3 || math.Abs(s.Pass1After.Min-0.702) > 1e-12 || math.Abs(s.PassKAfter.Max-0.668) > 1e-12 {
		t.Errorf("summary %+v", s)
	}
	for name, wants := range map[string][]string{
		"runs_reward.svg": {"seed 1 · 20261128-0901-seed1", "seed 2 · 20261128-0930-seed2", "seed 3 · 20261128-1002-seed3",
			"mean of the 3 runs", "min–max across runs", "demonstrator 0.41"},
		"runs_passk.svg": {"pass^1 before GRPO", "pass^1 after GRPO", "pass^4 before GRPO", "pass^4 after GRPO", "seed 2 · 20261128-0930-seed2"},
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s does not name %q", name, w)
			}
		}
	}
}

// TestFromReportsErrors: a missing or invalid report is named; two reports of one directory and
// seed stay told apart.
func TestFromReportsErrors(t *testing.T) {
	if _, err := FromReports(nil, 4); err == nil {
		t.Error("no reports accepted")
	}
	bad := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(bad, []byte(`{"grpo": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FromReports([]string{runReports[0], bad}, 4); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("err %v, want it to name %s", err, bad)
	}
	runs, err := FromReports([]string{runReports[0], runReports[0]}, 4)
	if err != nil || runs[0].Label == runs[1].Label {
		t.Fatalf("labels %q %q (%v)", runs[0].Label, runs[1].Label, err)
	}
}
