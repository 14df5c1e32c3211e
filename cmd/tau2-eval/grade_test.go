package main

import (
	"slices"
	"testing"

	"tau2rl/cmd/internal/clitest"
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
