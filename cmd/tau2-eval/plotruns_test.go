package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotSeveralReports: report= with several report.json files separated by commas draws the
// runs on one figure, writes the spread summary beside the figures and says it in one line.
func TestPlotSeveralReports(t *testing.T) {
	dir := filepath.Join("..", "..", "consumers", "figures", "testdata", "runs")
	var reports []string
	for _, r := range []string{"20261128-0901-seed1", "20261128-0930-seed2", "20261128-1002-seed3"} {
		reports = append(reports, filepath.Join(dir, r, "report.json"))
	}
	out := filepath.Join(t.TempDir(), "seeds")
	cfg := defaultPlotConfig()
	cfg.Report, cfg.Out, cfg.Formats = strings.Join(reports, ",")+",", out, []string{"png"}
	var stdout bytes.Buffer
	if err := runPlot(context.Background(), &cfg, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "3 runs: pass^1 after GRPO mean 0.833 (min 0.702, max 0.913), pass^4 mean 0.530 (min 0.327, max 0.668)") {
		t.Errorf("output %q", stdout.String())
	}
	for _, f := range []string{"runs_reward.png", "runs_passk.png", "runs_summary.json", "runs_summary.md"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "reward.png")); err == nil {
		t.Error("the one-run reward figure drawn for several runs")
	}
	cfg.Report = reports[0] + "," + filepath.Join(dir, "missing", "report.json")
	if err := runPlot(context.Background(), &cfg, &stdout); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing report: err %v", err)
	}
}
