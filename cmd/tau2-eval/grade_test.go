package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/cmd/internal/cli"
	"tau2rl/cmd/internal/clitest"
	"tau2rl/tau2/tau2test"
)

func TestSplitArgs(t *testing.T) {
	got, err := splitArgs([]string{"in.json", "-o", "out.json", "workers=2", "--log-level", "debug", "--output=x"}, "input")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"input=in.json", "output=out.json", "workers=2", "--log-level", "debug", "output=x"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := splitArgs([]string{"-o"}, "input"); err == nil {
		t.Error("-o without a file accepted")
	}
	if _, err := splitArgs([]string{"stray"}, ""); err == nil {
		t.Error("positional argument accepted by a command without one")
	}
}

// TestGradeFixture regrades the evaluator's fixture results file end to
// end: the output parses, keeps the unknown fields and the report shows
// pass^k and the agreement with the file's (partly stale) rewards.
func TestGradeFixture(t *testing.T) {
	tau2test.DataDir(t)
	out := filepath.Join(t.TempDir(), "regraded.json")
	cfg := defaultGradeConfig()
	cfg.Input = filepath.Join("..", "..", "tau2", "evaluator", "testdata", "results_mock.json")
	cfg.Output = out
	var buf bytes.Buffer
	rt := &cli.Runtime{Registry: prometheus.NewRegistry(), Log: slog.Default(), Ready: func() {}}
	if err := runGrade(context.Background(), &cfg, &buf, rt); err != nil {
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

// TestConfigFiles: testdata/config/{run,grade,report,synth}/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	for name, newConfig := range map[string]func() any{
		"run":    func() any { c := defaultRunConfig(); return &c },
		"grade":  func() any { c := defaultGradeConfig(); return &c },
		"report": func() any { c := defaultReportConfig(); return &c },
		"synth":  func() any { c := defaultSynthConfig(); return &c },
	} {
		t.Run(name, func(t *testing.T) { clitest.ConfigFiles(t, "testdata/config/"+name, newConfig) })
	}
}
