package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"tau2rl/gpu/cuda"
	"tau2rl/trainer/sft"

	"tau2rl/cmd/internal/cli"
)

const sftUsage = `tau2-trainer sft — supervised fine-tuning on archived trajectories (tau2rl)

Trains the policy on the completion tokens (what the policy generated) of the trajectories of a
Parquet dataset (the archiver's dataset_dir) or a release (verified against its manifest.json),
read directly, without Kafka. The filters are tau2-replay's (filter.domains, filter.splits,
filter.task_ids, filter.min_policy_version, filter.max_policy_version, filter.min_reward,
filter.max_reward, filter.include_infra_errors); rejection-sampling fine-tuning is
filter.min_reward=1. Sequences and prefix-tree packing are the GRPO trainer's (shared prefixes
computed once); the loss is the mean negative log-likelihood per completion token of each step.

Checkpoints go to out/v<N>/ (N = optimizer steps) in the GRPO trainer's format: Hugging Face
safetensors + optimizer.safetensors + trainer_state.json, loadable by tau2-trainer model.path=,
SGLang, vLLM and tau2-sampler. A run whose out already holds a checkpoint resumes from it exactly.
Every step is logged (loss, tokens/s) and appended to out/steps.jsonl.

The model starts from model.path (a Hugging Face Qwen3 directory) or a random initialisation
(model.config, model.seed).

Examples:
  tau2-trainer sft dataset=data/trajectories out=sft filter.domains=[airline] filter.splits=[train]
  tau2-trainer sft dataset=releases/airline-v1 out=rft filter.min_reward=1 epochs=2 \
      model.path=/models/Qwen3-1.7B backend=cuda optimizer.lr=1e-5 batch_tokens=262144
  tau2-trainer sft dataset=demos out=sft model.config=deploy/models/qwen3-learn/config.json \
      backend=cuda epochs=3 optimizer.lr=1e-3`

// SFTConfig is the configuration of tau2-trainer sft.
type SFTConfig struct {
	// Backend is "cpu" (default) or "cuda".
	Backend string `yaml:"backend"`
	// CUDA tunes the cuda backend.
	CUDA cuda.Options `yaml:"cuda"`
	// Model is the starting point when out has no checkpoint.
	Model ModelConfig `yaml:"model"`

	sft.Config `yaml:",inline"`
}

// DefaultSFTConfig returns the documented defaults.
func DefaultSFTConfig() SFTConfig {
	return SFTConfig{Backend: "cpu", CUDA: cuda.DefaultOptions(), Model: ModelConfig{Seed: 1}, Config: sft.DefaultConfig()}
}

func sftMain(args []string) {
	cfg := DefaultSFTConfig()
	cli.MainArgs(cli.App{Name: "tau2-trainer sft", Usage: sftUsage, MetricsAddr: "off"}, args, &cfg,
		func(ctx context.Context, rt *cli.Runtime) error { return runSFT(ctx, rt, &cfg, nil) })
}

// runSFT validates everything, reads the data, then opens the backend (resuming from out when it
// holds a checkpoint) and trains. A summary line goes to out (stdout when nil).
func runSFT(ctx context.Context, rt *cli.Runtime, cfg *SFTConfig, out io.Writer) error {
	if err := errors.Join(cfg.Config.Validate(), cfg.CUDA.Validate()); err != nil {
		return fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if _, ok := backends[cfg.Backend]; !ok {
		return fmt.Errorf("%w: backend %q is not available in this binary (have: %s; cuda needs -tags cuda)", cli.ErrUsage, cfg.Backend, backendNames())
	}
	trajs, _, err := sft.Load(ctx, &cfg.Config, rt.Log)
	if err != nil {
		return err
	}
	tc := DefaultConfig()
	tc.Backend, tc.CUDA, tc.Model = cfg.Backend, cfg.CUDA, cfg.Model
	tc.Checkpoint.Dir, tc.Checkpoint.Keep = cfg.Out, cfg.Keep
	be, resume, err := openBackend(&tc, rt)
	if err != nil {
		return err
	}
	defer be.Close()
	var start int64
	if resume != nil {
		start = resume.Step
	}
	rt.Ready()
	res, err := sft.Run(ctx, cfg.Config, be, trajs, start, rt.Log)
	if err != nil {
		return err
	}
	if out == nil {
		out = stdout
	}
	fmt.Fprintf(out, "sft: %d trajectories, %d steps (%d in total), loss %.4f → %.4f, %d loss tokens, tree ratio %.3f, %s → %s\n",
		res.Trajectories, res.Steps, res.TotalSteps, res.FirstLoss, res.LastLoss, res.LossTokens,
		float64(res.PackedTokens)/float64(max(res.OriginalTokens, 1)), res.Elapsed.Round(1e6), res.Checkpoint)
	return nil
}
