package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"tau2rl/cmd/internal/clitest"
)

// TestPipelineEndToEnd is `make run` on the mock domain: the real binaries, each its own
// process, on the embedded broker, until the trainer has taken a step; then the summary read
// back from the Parquet dataset. It checks what a user would look at: every process came up,
// trajectories were archived without duplicates, the trainer checkpointed, and tau2-run exited 0.
func TestPipelineEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every binary (~30 s)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/",
		"./cmd/tau2-broker", "./cmd/tau2-scripted-llm", "./cmd/tau2-archiver", "./cmd/tau2-trainer",
		"./cmd/tau2-producer", "./cmd/tau2-run")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	runDir := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "tau2-run"), "bin="+bin, "dir="+runDir,
		"domain=mock", "split=base", "steps=1", "timeout=3m")
	cmd.Dir = root // model_config is relative to the repository, as under make run
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("tau2-run output:\n%s", out.String())
	if err != nil {
		if logs, _ := filepath.Glob(filepath.Join(runDir, "*", "*.log")); len(logs) > 0 {
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, tailLines(string(b), 20))
			}
		}
		t.Fatalf("tau2-run: %v", err)
	}
	text := out.String()
	for _, role := range []string{"broker", "scripted-llm", "archiver", "trainer", "producer"} {
		if !regexp.MustCompile(`tau2-run: ` + regexp.QuoteMeta(role) + ` +up`).MatchString(text) {
			t.Errorf("%s did not come up", role)
		}
	}
	m := regexp.MustCompile(`(\d+) trajectories, (\d+) duplicate ids`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("no dataset line in the summary")
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Error("no trajectories archived")
	}
	if m[2] != "0" {
		t.Errorf("%s duplicate trajectory ids", m[2])
	}
	if !regexp.MustCompile(`mock +\d+ episodes +mean reward`).MatchString(text) {
		t.Error("no reward line for the mock domain")
	}
	if !regexp.MustCompile(`checkpoints in .*: v1`).MatchString(text) {
		t.Error("the trainer wrote no checkpoint")
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestConfigFiles: testdata/config/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	clitest.ConfigFiles(t, "testdata/config", func() any { c := defaultConfig(); return &c })
}
