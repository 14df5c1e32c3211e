package main

import (
	"context"
	"os"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/deploy/localrun"
)

const experimentUsage = `tau2-run experiment — does the loop learn? SFT, then GRPO, measured (issue 12; docs/LEARNING.md)

Runs, each binary its own process beside one tau2-broker, in 'dir'/<timestamp>/:
  0. tasks: one list for every stage — domain/split, restricted to task_ids when set, to the
     tasks with a state-changing expected action (write_tasks_only, default true), to the tasks
     the run can grade (no NL judge is run; a task whose grading fails when the policy errs is
     left out, saying why), and to the first 'tasks';
  1. demonstrations: tau2-producer self_driven.* plays them demo_trials times with the SCRIPTED
     policy (tau2-scripted-llm at agent_error_rate) against the scripted user simulator;
     tau2-archiver writes them (demos/); tau2-archiver release cuts release/;
  2. SFT: tau2-trainer sft on the demonstrations with reward ≥ sft_min_reward (default 1:
     rejection-sampled SFT from the successful ones; sft_min_reward=0 takes all of them, mistakes
     included), from random weights of model_config (default qwen3-learn-100m) or model_path, on
     backend cpu|cuda → sft/v<N>;
  3. evaluation before: tau2-eval run, the same tasks, eval_trials trials → pass^1..pass^k (and
     again at each of probe_temperatures);
  4. GRPO: tau2-trainer (model.path = the SFT checkpoint, AReaL's τ² settings: group_size 8,
     max_head_offpolicyness = offpolicyness (2), decoupled loss, eps_clip 0.4,
     behav_imp_weight_cap 5; grpo_lr, grpo_temperature, trainer_args) with
     tau2-producer, tau2-archiver (grpo/) and the policy server, reloaded after every step, for
     grpo_steps steps or grpo_time, whichever ends first;
  5. evaluation after, as in 3;
  6. report.md and report.json: demonstration success, SFT loss, pass^k before/after, mean reward
     per policy version, the train/inference log-prob mismatch, time split; and the figures of
     tau2-eval plot when that command exists.

policy=sampler (the real experiment) serves the model with tau2-sampler (model=<checkpoint>
listen=… backend=…; SGLang's /generate and /update_weights_from_disk). gpus=N samplers=K place
the GRPO stage (docs/MULTIGPU.md): default 1 and 1, the sampler and the trainer sharing device 0;
with gpus > 1 each sampler runs alone on its GPU and the trainer on the other N−K as data-parallel
ranks (CUDA_VISIBLE_DEVICES per process); producers, evaluations and reloads use every sampler. policy=scripted stands
the scripted server in for the sampler, so every stage runs on a laptop (the policy then does not
change: the trainer trains, the served answers stay scripted); cmd/tau2-run's test runs it.

Examples:
  # on one H100 (make learn): binaries with the CUDA trainer and tau2-sampler in bin/
  tau2-run experiment policy=sampler backend=cuda
  # every stage on a laptop, in about a minute
  tau2-run experiment policy=scripted backend=cpu domain=mock split=base model_config=deploy/models/qwen3-tiny/config.json \
      tasks=2 demo_trials=2 sft_min_reward=0 sft_max_steps=1 grpo_steps=1 group_size=2 batch_size=1 eval_trials=1
  # a 4-GPU host: three samplers on GPUs 0-2, the trainer on GPU 3 (samplers=2: two trainer ranks)
  tau2-run experiment gpus=4 samplers=3 concurrency=288 model_config=deploy/models/qwen3-1.7b/config.json grpo_time=5m eval_trials=0
  # three seeds of the recipe at once on one GPU, then one figure of the three
  for s in 1 2 3; do tau2-run experiment seed=$s dir=run/seed$s 'sampler_args=[kv.memory_fraction=0.08]' & done; wait
  tau2-eval plot report=$(ls run/seed*/*/report.json | paste -sd,) out=run/seeds`

// expConfig is tau2-run experiment's configuration: localrun.ExperimentConfig's keys.
type expConfig struct {
	localrun.ExperimentConfig `yaml:",inline"`
}

func defaultExpConfig() expConfig { return expConfig{localrun.DefaultExperimentConfig()} }

func experimentMain(args []string) {
	cfg := defaultExpConfig()
	cli.MainArgs(cli.App{Name: "tau2-run experiment", Usage: experimentUsage, MetricsAddr: "off"}, args, &cfg,
		func(ctx context.Context, rt *cli.Runtime) error {
			if err := localrun.PrepareExperiment(&cfg.ExperimentConfig, os.Stdout); err != nil {
				return prepareUsage(err)
			}
			dir, err := localrun.NewRunDir(cfg.Dir, time.Now())
			if err != nil {
				return err
			}
			rt.Ready()
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			return localrun.RunExperiment(ctx, cfg.ExperimentConfig, dir, os.Stdout)
		})
}
