package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"tau2rl/gpu"
	"tau2rl/gpu/backends"
	"tau2rl/gpu/cuda"
	"tau2rl/schemas"
	"tau2rl/trainer/sft"
	"tau2rl/trainer/topology"

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

The model starts from model.path (a Hugging Face Qwen3 directory) or a random initialisation of
model.config (a config.json; model.seed); one of the two is required. Every token id of the
selected trajectories is checked against the model's vocabulary before the first step.

Examples:
  tau2-trainer sft dataset=data/trajectories out=sft filter.domains=[airline] filter.splits=[train] \
      model.path=/models/Qwen3-1.7B
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
	Model topology.Model `yaml:"model"`

	sft.Config `yaml:",inline"`
}

// DefaultSFTConfig returns the documented defaults.
func DefaultSFTConfig() SFTConfig {
	return SFTConfig{Backend: "cpu", CUDA: cuda.DefaultOptions(), Model: topology.Model{Seed: 1}, Config: sft.DefaultConfig()}
}

// Validate checks the whole configuration (cli calls it before run: exit status 2, and
// --print-config lists the required keys still unset).
func (c *SFTConfig) Validate() error {
	return errors.Join(c.Config.Validate(), c.CUDA.Validate(), c.Model.Validate())
}

// checkVocabulary refuses trajectories holding a token id the model cannot embed — data
// tokenized for another model, or a model.config with a smaller vocabulary than the tokenizer's —
// before any step, naming the trajectory and what to change (a usage error, exit status 2).
func checkVocabulary(trajs []*schemas.Trajectory, mc gpu.Config, model string) error {
	for _, t := range trajs {
		for i, c := range t.Calls {
			for _, toks := range [][]int32{c.PromptTokens, c.CompletionTokens} {
				for _, id := range toks {
					if id < 0 || int(id) >= mc.VocabSize {
						return fmt.Errorf("%w: trajectory %s (task %s), call %d holds token id %d, outside the model's vocabulary [0,%d) (%s): "+
							"the dataset was tokenized for another vocabulary (Qwen3's has 151936 ids); start from a model that has it "+
							"(model.path=/models/Qwen3-1.7B, or model.config=deploy/models/qwen3-tiny/config.json for a smoke run)",
							cli.ErrUsage, t.ID, t.TaskID, i, id, mc.VocabSize, model)
					}
				}
			}
		}
	}
	return nil
}

func sftMain(args []string) {
	cfg := DefaultSFTConfig()
	cli.MainArgs(cli.App{Name: "tau2-trainer sft", Usage: sftUsage, MetricsAddr: "off"}, args, &cfg,
		func(ctx context.Context, rt *cli.Runtime) error { return runSFT(ctx, rt, &cfg, nil) })
}

// runSFT validates everything, reads the data, then opens the backend (resuming from out when it
// holds a checkpoint) and trains. A summary line goes to out (stdout when nil).
func runSFT(ctx context.Context, rt *cli.Runtime, cfg *SFTConfig, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	if _, err := backends.Get(cfg.Backend); err != nil {
		return cli.Usage(err)
	}
	trajs, _, err := sft.Load(ctx, &cfg.Config, rt.Log)
	if err != nil {
		return err
	}
	tc := DefaultConfig()
	tc.Backend, tc.CUDA, tc.Model = cfg.Backend, cfg.CUDA, cfg.Model
	tc.Checkpoint.Dir, tc.Checkpoint.Keep = cfg.Out, cfg.Keep
	be, resume, err := topology.Open(tc.topology(rt))
	if err != nil {
		return settingsUsage(err)
	}
	defer be.Close()
	from := "model.path=" + cfg.Model.Path
	switch {
	case resume != nil:
		from = "the checkpoint in " + cfg.Out
	case cfg.Model.Path == "":
		from = "model.config=" + cfg.Model.Config
	}
	if err := checkVocabulary(trajs, be.Config(), from); err != nil {
		return err
	}
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
