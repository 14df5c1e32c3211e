package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/deploy/localrun"
	"tau2rl/schemas/report"
)

// TestExperimentTwoSamplersCPU is the several-GPU layout of issue 29 without the GPUs:
// samplers=2 starts two real tau2-sampler processes (pure-Go backend, the tiny model trained by
// the run's SFT), the producer spreads its policy calls over both (policy.endpoints) and the
// trainer reloads both after every step (reload.endpoints); the timeline scrapes each and
// report.json's grpo.samplers records what each served. Every sampler must have served calls,
// hold the trainer's last version, and have taken one weight update per step besides the fresh
// start's version 0. The policy is random weights, so every reward is 0 and the trainer keeps
// equal-reward groups (actor.advantage.drop_equal_rewards=false) to take its steps; 8 new tokens
// a call and no proximal recomputation keep the pure-Go trainer's steps short (the LM head over
// Qwen3's vocabulary is most of their cost). About two minutes on two cores, so not under -short.
func TestExperimentTwoSamplersCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every binary with two CPU samplers (~2 min on 2 cores)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinaries(t)
	if err := bins.Build("tau2-sampler"); err != nil {
		t.Fatal(err)
	}
	runDir := t.TempDir()
	const steps = 2
	cmd := exec.Command(filepath.Join(bin, "tau2-run"), "experiment", "bin="+bin, "dir="+runDir,
		"policy=sampler", "backend=cpu", "samplers=2", "domain=mock", "split=base", "model_config=deploy/models/qwen3-tiny/config.json",
		"tasks=1", "demo_trials=2", "sft_min_reward=0", "sft_max_steps=1", "group_size=2", "batch_size=1", "grpo_steps=2",
		"eval_trials=0", "concurrency=4", "max_new_tokens=8", "timeout=8m",
		"trainer_args=[actor.advantage.drop_equal_rewards=false, actor.recompute_logprob=false]")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("tau2-run experiment output:\n%s", out.String())
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(runDir, "*", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, tailLines(string(b), 15))
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
	if rep.GRPO.Steps != steps {
		t.Fatalf("grpo took %d steps, want %d: %+v", rep.GRPO.Steps, steps, rep.GRPO)
	}
	if len(rep.GRPO.Samplers) != 2 {
		t.Fatalf("grpo.samplers: %+v, want two", rep.GRPO.Samplers)
	}
	addrs := map[string]bool{}
	for _, s := range rep.GRPO.Samplers {
		addrs[s.Addr] = true
		if s.Calls <= 0 || s.WeightVersion != steps || s.Reloads != steps+1 {
			t.Errorf("sampler %s: %+v, want calls > 0, version %d, %d weight updates (version 0 at the trainer's start, one per step)",
				s.Name, s, steps, steps+1)
		}
	}
	if len(addrs) != 2 {
		t.Errorf("the samplers share an address: %+v", rep.GRPO.Samplers)
	}
	timeline := map[string]bool{}
	if g := rep.GRPO.GPUTime; g != nil {
		for _, r := range g.Roles {
			if r.Role == report.RoleSampler {
				timeline[r.Name] = true
			}
		}
	}
	if len(timeline) != 2 || !timeline[rep.GRPO.Samplers[0].Addr] || !timeline[rep.GRPO.Samplers[1].Addr] {
		t.Errorf("the timeline's samplers %v, want both of %+v", timeline, rep.GRPO.Samplers)
	}
	pb, err := os.ReadFile(filepath.Join(filepath.Dir(reports[0]), localrun.PerfFile))
	if err != nil {
		t.Fatal(err)
	}
	var p localrun.Perf
	if err := json.Unmarshal(pb, &p); err != nil || p.Layout != "cpu-2sampler" || p.GPUs != 0 {
		t.Errorf("perf.json %s: %v, want layout cpu-2sampler, gpus 0", pb, err)
	}
}

// TestIssue29RunLists: every line of deploy/scripts/issue29/*.runs (learn-prebuilt.sh start-seq's
// run lists for the 4-GPU lease) is a valid tau2-run experiment command line whose model config
// exists, and the lists hold the layouts the issue asks for (one GPU, 3+1 and 2+2) at both model
// shapes and offpolicyness 0, 2 and 4: a typo must fail here, not after a lease has started.
func TestIssue29RunLists(t *testing.T) {
	lists, _ := filepath.Glob("../../deploy/scripts/issue29/*.runs")
	if len(lists) == 0 {
		t.Fatal("no deploy/scripts/issue29/*.runs")
	}
	names := map[string]bool{}
	seen := map[string]bool{}
	for _, l := range lists {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || strings.HasPrefix(f[0], "#") {
				continue
			}
			where := fmt.Sprintf("%s:%d (%s)", filepath.Base(l), i+1, f[0])
			if names[f[0]] {
				t.Errorf("%s: name used twice (the runs would share a directory)", where)
			}
			names[f[0]] = true
			cfg := defaultExpConfig()
			if _, err := cli.Parse(f[1:], &cfg); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			if _, err := os.Stat(filepath.Join("../..", cfg.ModelConfig)); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			if cfg.EvalTrials != 0 || cfg.GRPOTime != 5*time.Minute || cfg.Concurrency != 96*cfg.Samplers {
				t.Errorf("%s: eval_trials %d, grpo_time %s, concurrency %d: want a throughput run of 5m at 96 per sampler",
					where, cfg.EvalTrials, cfg.GRPOTime, cfg.Concurrency)
			}
			seen[fmt.Sprintf("%s %dgpu %ds op%d", filepath.Base(filepath.Dir(cfg.ModelConfig)), cfg.GPUs, cfg.Samplers, cfg.Offpolicyness)] = true
		}
	}
	for _, want := range []string{"qwen3-1.7b 1gpu 1s op2", "qwen3-1.7b 4gpu 3s op2", "qwen3-1.7b 4gpu 2s op2",
		"qwen3-1.7b 1gpu 1s op0", "qwen3-1.7b 1gpu 1s op4", "qwen3-1.7b 4gpu 3s op0", "qwen3-1.7b 4gpu 3s op4",
		"qwen3-0.6b 1gpu 1s op2", "qwen3-0.6b 4gpu 3s op2", "qwen3-0.6b 4gpu 2s op2"} {
		if !seen[want] {
			t.Errorf("no run of %s in the lists (have %v)", want, seen)
		}
	}
}
