package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"tau2rl/cmd/internal/clitest"
	"tau2rl/lib/proc"
	"tau2rl/tau2/data"
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
	bin := buildBinaries(t)
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
	// steps=1 gives the trainer max_steps=1: one checkpoint, no step started past the target
	// (which SIGTERM would have had to wait for).
	if !regexp.MustCompile(`checkpoints in .*: v1\n`).MatchString(text) {
		t.Error("the trainer wrote no checkpoint, or more than steps=1")
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestExperimentCPU runs `tau2-run experiment` at a tiny scale on the pure-Go backend with the
// scripted server standing in for tau2-sampler: every stage (demonstrations, release, SFT,
// evaluation, GRPO with reloads, evaluation, report) as separate processes, as on the GPU. The
// second case asks for more groups per step than GRPO's few seconds produce: the experiment
// must still end with a report that says why no step was taken (it once failed on the missing
// steps log instead).
func TestExperimentCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every binary (~1 min)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinaries(t)
	for _, c := range []struct {
		name  string
		args  []string
		check func(t *testing.T, rep report, dir string)
	}{
		{"one step", []string{"grpo_steps=1", "batch_size=1"}, func(t *testing.T, rep report, dir string) {
			switch {
			case rep.GRPO.Steps != 1 || rep.GRPO.Episodes < 2 || len(rep.GRPO.PerVersion) == 0 || len(rep.GRPO.MeanAbsDiff) != 1:
				t.Errorf("grpo: %+v", rep.GRPO)
			case rep.GRPO.NoStepReason != "":
				t.Errorf("no-step reason after a step: %q", rep.GRPO.NoStepReason)
			case len(rep.Figures) != 10: // reward, passk, tokens and episodes per minute, mismatch; PNG and SVG
				t.Errorf("figures: %v", rep.Figures)
			}
			// The GRPO trainer started from the SFT checkpoint and wrote its own.
			if _, err := os.Stat(filepath.Join(dir, "grpo-checkpoints", "v1", "model.safetensors")); err != nil {
				t.Error(err)
			}
		}},
		{"no step", []string{"grpo_steps=1", "batch_size=1000", "grpo_time=4s"}, func(t *testing.T, rep report, dir string) {
			switch {
			case rep.GRPO.Steps != 0 || rep.GRPO.StepsLog != "":
				t.Errorf("grpo: %+v", rep.GRPO)
			case !strings.Contains(rep.GRPO.NoStepReason, "no batch of 1000 groups was ready"):
				t.Errorf("no-step reason: %q", rep.GRPO.NoStepReason)
			case len(rep.Figures) != 8: // no mismatch figure without steps
				t.Errorf("figures: %v", rep.Figures)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "report.md")); err != nil || !strings.Contains(string(b), "GRPO took no step") {
				t.Errorf("report.md does not say GRPO took no step (%v)", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runDir := t.TempDir()
			args := append([]string{"experiment", "bin=" + bin, "dir=" + runDir,
				"policy=scripted", "backend=cpu", "domain=mock", "split=base", "model_config=deploy/models/qwen3-tiny/config.json",
				"tasks=1", "demo_trials=2", "sft_max_steps=1", "group_size=2", "eval_trials=2",
				"concurrency=8", "timeout=4m"}, c.args...)
			cmd := exec.Command(filepath.Join(bin, "tau2-run"), args...)
			cmd.Dir = root
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			t.Logf("tau2-run experiment output:\n%s", out.String())
			if err != nil {
				if logs, _ := filepath.Glob(filepath.Join(runDir, "*", "*.log")); len(logs) > 0 {
					for _, l := range logs {
						b, _ := os.ReadFile(l)
						t.Logf("%s:\n%s", l, tailLines(string(b), 15))
					}
				}
				t.Fatalf("tau2-run experiment: %v", err)
			}
			reports, _ := filepath.Glob(filepath.Join(runDir, "*", "report.json"))
			if len(reports) != 1 {
				t.Fatalf("report.json: %v", reports)
			}
			b, err := os.ReadFile(reports[0])
			if err != nil {
				t.Fatal(err)
			}
			var rep report
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			switch {
			case rep.Demos.Episodes != 2:
				t.Errorf("demonstrations: %d episodes, want 2", rep.Demos.Episodes)
			case rep.SFT.Steps != 1 || !(rep.SFT.FirstLoss > 0):
				t.Errorf("sft: %+v", rep.SFT)
			case rep.Before.Simulations != 2 || rep.After.Simulations != 2 || len(rep.Before.PassK) != 2:
				t.Errorf("evaluations: before %+v after %+v", rep.Before, rep.After)
			}
			c.check(t, rep, filepath.Dir(reports[0]))
		})
	}
}

// bins builds the binaries the tests run, once per test process (lib/proc, as deploy/deploytest).
var bins *proc.Binaries

// buildBinaries builds every binary both tests run and returns their directory.
func buildBinaries(t *testing.T) string {
	t.Helper()
	if err := bins.Build("tau2-broker", "tau2-scripted-llm", "tau2-archiver", "tau2-trainer",
		"tau2-producer", "tau2-eval", "tau2-run"); err != nil {
		t.Fatal(err)
	}
	return bins.Dir
}

func TestMain(m *testing.M) {
	var err error
	if bins, err = proc.TempBinaries(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	bins.Remove()
	os.Exit(code)
}

// TestConfigFiles: testdata/config/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	clitest.ConfigFiles(t, "testdata/config", func() any { c := defaultConfig(); return &c })
}

// TestNewRunDir: runs started within one second get their own directories.
func TestNewRunDir(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "runs")
	now := time.Date(2026, 11, 27, 17, 30, 5, 0, time.UTC)
	want := []string{"20261127-173005", "20261127-173005-2", "20261127-173005-3"}
	for _, w := range want {
		dir, err := newRunDir(parent, now)
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsAbs(dir) || filepath.Base(dir) != w {
			t.Fatalf("run directory %q, want an absolute path ending in %s", dir, w)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("run directory %s not created: %v", dir, err)
		}
	}
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newRunDir(blocker, now); err == nil {
		t.Fatal("a parent that is a file: no error")
	}
}

func TestLastLineWith(t *testing.T) {
	text := "    a waiting for groups 1\n    b\n    c waiting for groups 2\n    d"
	for _, c := range []struct{ substr, want string }{
		{"waiting for groups", "c waiting for groups 2"},
		{"b", "b"},
		{"absent", ""},
	} {
		if got := lastLineWith(text, c.substr); got != c.want {
			t.Errorf("lastLineWith(%q) = %q, want %q", c.substr, got, c.want)
		}
	}
}

// TestCheckDomain: an unknown domain is a usage error naming the domains the data has.
func TestCheckDomain(t *testing.T) {
	dir, err := data.Dir("")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"airline", "retail", "telecom", "telecom-workflow", "mock"} {
		if err := checkDomain(dir, d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	err = checkDomain(dir, "nope")
	if err == nil || !strings.Contains(err.Error(), `domain "nope"`) || !strings.Contains(err.Error(), "airline") {
		t.Fatalf("unknown domain: %v", err)
	}
}

// TestStallWatch: the trainer's "waiting for groups" line is passed on once per stall, only after
// stallHint without a step, with the log read at most once per stallHint; a step starts over.
func TestStallWatch(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	log := "x\nlevel=INFO msg=\"waiting for groups\" ready_groups=0\n"
	for _, c := range []struct {
		name  string
		steps []float64 // one observation every 30 s
		logAt int       // the first observation whose log has the line (-1: never)
		say   []int     // observations that pass the line on
		reads int       // log reads
	}{
		{"stalled from the start", []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0, []int{4}, 1},
		{"steps keep coming", []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, nil, 0},
		{"a step, then a stall", []float64{0, 0, 0, 1, 1, 1, 1, 1, 1, 1}, 0, []int{7}, 1},
		{"nothing logged yet at the first look", []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 6, []int{8}, 2},
		{"a new stall after a step says again", []float64{0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, 0, []int{4, 9}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newStallWatch(t0)
			reads := 0
			var said []int
			for i, s := range c.steps {
				now := t0.Add(time.Duration(i) * 30 * time.Second)
				why, d := w.observe(now, s, func() string {
					reads++
					if c.logAt >= 0 && i >= c.logAt {
						return log
					}
					return "x\n"
				})
				if why != "" {
					said = append(said, i)
					if !strings.Contains(why, "waiting for groups") || d < stallHint {
						t.Errorf("observation %d: %q after %s", i, why, d)
					}
				}
			}
			if fmt.Sprint(said) != fmt.Sprint(c.say) || reads != c.reads {
				t.Errorf("said at %v with %d log reads, want %v with %d", said, reads, c.say, c.reads)
			}
		})
	}
}
