package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"tau2rl/cmd/internal/clitest"
	"tau2rl/deploy/localrun"
	"tau2rl/lib/proc"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/report"
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
	text, _ := runPipeline(t, root, "domain=mock", "split=base", "steps=1", "timeout=3m")
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
	if !regexp.MustCompile(`GPU time \(.*gputime\.jsonl\): [0-9.]+ episodes/s.*trainer trainer idle \d+%`).MatchString(text) {
		t.Error("no GPU time line (the trainer's and producer's timeline)")
	}
}

// TestPipelineBankingKnowledge is `make run RUN_ARGS="domain=banking_knowledge
// retrieval_config=no_knowledge"` at the smallest scale (one step of one group of two): the
// trainer's admission takes the domain without a split file (it exited at start-up on the missing
// split_tasks.json), and the producer runs the retrieval configuration it is handed — under the
// default, bm25, the scripted agent opens every banking episode with a KB_search; under
// no_knowledge no episode has a lookup. no_knowledge also keeps the episodes short (a 3.8k-token
// final prompt for task_001, 12k with grep_only's ten-document results). Still, the pure-Go
// trainer's one step on banking episodes is the test's cost: 3 to 5 minutes on 2 shared cores.
func TestPipelineBankingKnowledge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every binary on banking_knowledge (3-5 min on 2 cores)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	text, runDir := runPipeline(t, root, "domain=banking_knowledge", "split=base", "retrieval_config=no_knowledge",
		"steps=1", "group_size=2", "batch_size=1", "concurrency=4", "timeout=6m")
	if !regexp.MustCompile(`banking_knowledge +\d+ episodes +mean reward`).MatchString(text) {
		t.Error("no reward line for banking_knowledge")
	}
	if !regexp.MustCompile(`checkpoints in .*: v1\n`).MatchString(text) {
		t.Error("the trainer wrote no checkpoint, or more than steps=1")
	}
	sets, _ := filepath.Glob(filepath.Join(runDir, "*", "dataset"))
	if len(sets) != 1 {
		t.Fatalf("dataset directories %v", sets)
	}
	d, err := dataset.Open(sets[0])
	if err != nil {
		t.Fatal(err)
	}
	episodes := 0
	if _, err := d.Scan(context.Background(), dataset.Filter{Domains: []string{"banking_knowledge"}}, func(tr *schemas.Trajectory) error {
		episodes++
		for _, m := range tr.Messages {
			for _, c := range m.ToolCalls {
				if c.Name == "KB_search" || c.Name == "grep" || c.Name == "shell" {
					t.Errorf("episode %s (task %s) called %s, which no_knowledge does not offer", tr.ID, tr.TaskID, c.Name)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if episodes == 0 {
		t.Error("no banking_knowledge episode archived")
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
		check func(t *testing.T, rep localrun.Report, dir string)
	}{
		{"one step", []string{"grpo_steps=1", "batch_size=1"}, func(t *testing.T, rep localrun.Report, dir string) {
			switch {
			case rep.GRPO.Steps != 1 || rep.GRPO.Episodes < 2 || len(rep.GRPO.PerVersion) == 0 || len(rep.GRPO.MeanAbsDiff) != 1:
				t.Errorf("grpo: %+v", rep.GRPO)
			case rep.GRPO.NoStepReason != "":
				t.Errorf("no-step reason after a step: %q", rep.GRPO.NoStepReason)
			case len(rep.Figures) != 14: // reward, passk, tokens and episodes per minute, mismatch, tasks × versions, gputime; PNG and SVG
				t.Errorf("figures: %v", rep.Figures)
			}
			checkGPUTime(t, rep, dir, 1)
			// The GRPO trainer started from the SFT checkpoint and wrote its own.
			if _, err := os.Stat(filepath.Join(dir, "grpo-checkpoints", "v1", "model.safetensors")); err != nil {
				t.Error(err)
			}
		}},
		{"no step", []string{"grpo_steps=1", "batch_size=1000", "grpo_time=4s"}, func(t *testing.T, rep localrun.Report, dir string) {
			switch {
			case rep.GRPO.Steps != 0 || rep.GRPO.StepsLog != "":
				t.Errorf("grpo: %+v", rep.GRPO)
			case !strings.Contains(rep.GRPO.NoStepReason, "no batch of 1000 groups was ready"):
				t.Errorf("no-step reason: %q", rep.GRPO.NoStepReason)
			case len(rep.Figures) != 12: // no mismatch figure without steps
				t.Errorf("figures: %v", rep.Figures)
			}
			checkGPUTime(t, rep, dir, 0)
			if b, err := os.ReadFile(filepath.Join(dir, "report.md")); err != nil || !strings.Contains(string(b), "GRPO took no step") {
				t.Errorf("report.md does not say GRPO took no step (%v)", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runDir := t.TempDir()
			args := append([]string{"experiment", "bin=" + bin, "dir=" + runDir,
				"policy=scripted", "backend=cpu", "domain=mock", "split=base", "model_config=deploy/models/qwen3-tiny/config.json",
				"tasks=1", "demo_trials=2", "sft_min_reward=0", "sft_max_steps=1", "group_size=2", "eval_trials=2",
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
			var rep localrun.Report
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

// checkGPUTime: the GRPO stage left its timeline, report.json summarises it (the trainer's busy
// shares, the producer's episodes; no sampler with policy=scripted, no GPU on this machine),
// and perf.json is one line naming the run's layout and settings.
func checkGPUTime(t *testing.T, rep localrun.Report, dir string, steps int) {
	t.Helper()
	g := rep.GRPO.GPUTime
	if g == nil || g.WallSeconds <= 0 {
		t.Fatalf("grpo.gpu_time: %+v", g)
	}
	if _, err := os.Stat(filepath.Join(dir, report.TimelineFile)); err != nil {
		t.Error(err)
	}
	roles := map[string]report.RoleTime{}
	for _, r := range g.Roles {
		roles[r.Role] = r
	}
	tr := roles[report.RoleTrainer]
	if tr.BusyShare["waiting"] <= 0 || (steps > 0) != (tr.BusyShare["train"] > 0) || tr.IdleShare <= 0 || tr.IdleShare > 1 {
		t.Errorf("trainer's time: %+v", tr)
	}
	if g.Loop.EpisodesPerS <= 0 || g.Loop.CallsPerS <= 0 {
		t.Errorf("loop rates: %+v", g.Loop)
	}
	b, err := os.ReadFile(filepath.Join(dir, localrun.PerfFile))
	if err != nil {
		t.Fatal(err)
	}
	var p localrun.Perf
	if err := json.Unmarshal(b, &p); err != nil || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("perf.json %q: %v", b, err)
	}
	if p.Layout != "cpu" || p.Model != "qwen3-tiny" || p.Params <= 0 || p.Steps != steps || p.Commit == "" || p.EpisodesPerS != g.Loop.EpisodesPerS {
		t.Errorf("perf.json: %+v", p)
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

// runPipeline runs the built tau2-run from the repository root (model_config is relative to it,
// as under make run) with args, and returns its output; on failure it logs the tail of every
// process's log before failing the test.
func runPipeline(t *testing.T, root string, args ...string) (string, string) {
	t.Helper()
	bin := buildBinaries(t)
	runDir := t.TempDir()
	cmd := exec.Command(filepath.Join(bin, "tau2-run"), append([]string{"bin=" + bin, "dir=" + runDir}, args...)...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
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
	return out.String(), runDir
}
