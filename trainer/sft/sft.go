// Package sft trains a policy by supervised fine-tuning on archived trajectories: the negative
// log-likelihood of the completion tokens (what the policy generated), read straight from a
// Parquet dataset or a release (no broker), laid out and packed exactly as the GRPO trainer lays
// out and packs its batches (trainer/batch sequences, trainer/prefixtree micro-batches, so shared
// prefixes — the system prompt, the conversation so far — are computed once), on the same
// gpu.Backend, with the same AdamW, writing the same checkpoints (trainer/checkpoint), which the
// GRPO trainer and the inference servers load unchanged.
//
// Rejection-sampling fine-tuning is SFT with filter.min_reward=1.
//
// The schedule is deterministic: each epoch shuffles the trajectories with a PCG seeded by
// (seed, epoch) and fills steps with whole trajectories until batch_tokens (prompt ‖ completion
// tokens before packing) is reached. A run resumed from one of its checkpoints skips the steps
// already taken and continues exactly (optimizer state included).
package sft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"tau2rl/gpu"
	"tau2rl/lib/logs"
	"tau2rl/lib/required"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/schemas/manifest"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/batch"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/loss"
	"tau2rl/trainer/prefixtree"
)

// Config configures a supervised run.
type Config struct {
	// Dataset is a Parquet dataset directory (the archiver's dataset_dir), a release directory
	// (its manifest.json is verified first: every file's size and sha256), a file or a glob.
	Dataset string `yaml:"dataset"`
	// Filter selects trajectories as tau2-replay does (domains, splits, task_ids, policy version
	// and reward ranges, include_infra_errors). Rejection sampling: filter.min_reward=1.
	Filter dataset.Filter `yaml:"filter"`
	// Out is the checkpoint root: out/v<N>/ (N = optimizer steps), as the GRPO trainer writes.
	// A run whose out already holds checkpoints resumes from the newest. Required.
	Out string `yaml:"out"`
	// Epochs is the number of passes over the selected trajectories. Default 1.
	Epochs int `yaml:"epochs"`
	// BatchTokens is the size of one optimizer step in prompt ‖ completion tokens before packing
	// (whole trajectories are added until it is reached; one larger trajectory is a step of its
	// own). Default 65536.
	BatchTokens int64 `yaml:"batch_tokens"`
	// MaxSteps stops after this many optimizer steps in total (0 = all epochs).
	MaxSteps int64 `yaml:"max_steps"`
	// Seed seeds the per-epoch shuffle. Default 1.
	Seed uint64 `yaml:"seed"`
	// SequenceMode is batch's "call" (default) or "conversation".
	SequenceMode string `yaml:"sequence_mode"`
	// Optimizer is AdamW (lr, betas, weight decay, clip) and the learning-rate schedule
	// (lr_schedule, warmup_steps, min_lr_ratio), which decays over the schedule's steps: every
	// epoch's steps, or max_steps when that is fewer, known before the first step. Default lr
	// 1e-4, otherwise gpu.DefaultOptimizer.
	Optimizer gpu.Optimizer `yaml:"optimizer"`
	// MBSpec is the micro-batch budget (max_tokens_per_mb); longer calls are left out and counted.
	MBSpec prefixtree.Config `yaml:"mb_spec"`
	// SaveEvery checkpoints every this many steps (0 = only at the end). Default 0.
	SaveEvery int64 `yaml:"save_every"`
	// Keep is how many checkpoints to keep. Default 2.
	Keep int `yaml:"keep"`
	// DType is the saved tensor type. Default bfloat16.
	DType string `yaml:"dtype"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	opt := gpu.DefaultOptimizer()
	opt.LR = 1e-4
	return Config{Epochs: 1, BatchTokens: 65536, Seed: 1, SequenceMode: batch.ModeCall, Optimizer: opt,
		MBSpec: prefixtree.DefaultConfig(), Keep: 2, DType: string(gpu.BF16)}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Dataset == "":
		return fmt.Errorf("sft: dataset is %w", required.ErrMissing)
	case c.Out == "":
		return fmt.Errorf("sft: out (the checkpoint directory) is %w", required.ErrMissing)
	case c.Epochs < 1:
		return fmt.Errorf("sft: epochs must be ≥ 1, got %d", c.Epochs)
	case c.BatchTokens < 1:
		return fmt.Errorf("sft: batch_tokens must be ≥ 1, got %d", c.BatchTokens)
	case c.MaxSteps < 0 || c.SaveEvery < 0:
		return fmt.Errorf("sft: max_steps (%d) and save_every (%d) must be ≥ 0", c.MaxSteps, c.SaveEvery)
	case c.Keep < 1:
		return fmt.Errorf("sft: keep must be ≥ 1, got %d", c.Keep)
	case c.SequenceMode != batch.ModeCall && c.SequenceMode != batch.ModeConversation:
		return fmt.Errorf("sft: sequence_mode %q: want %q or %q", c.SequenceMode, batch.ModeCall, batch.ModeConversation)
	}
	if _, err := gpu.ParseDType(c.DType); err != nil {
		return fmt.Errorf("sft: dtype: %w", err)
	}
	for _, v := range []interface{ Validate() error }{&c.Filter, c.Optimizer, c.MBSpec} {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("sft: %w", err)
		}
	}
	return nil
}

// Result summarises a run.
type Result struct {
	// Trajectories selected (after de-duplication by id) and Duplicates dropped.
	Trajectories, Duplicates int
	// Steps taken in this process and in total (a resumed run counts the earlier ones).
	Steps, TotalSteps int64
	// FirstLoss and LastLoss are the mean NLL per loss token of the first and last step run here.
	FirstLoss, LastLoss float64
	// LossTokens, OriginalTokens and PackedTokens sum the steps run here.
	LossTokens, OriginalTokens, PackedTokens int64
	// Oversize counts calls left out (longer than mb_spec.max_tokens_per_mb), once per epoch.
	Oversize int
	// Checkpoint is the final checkpoint directory.
	Checkpoint string
	Elapsed    time.Duration
}

// Load reads the selected trajectories of cfg.Dataset, de-duplicated by id (an id archived
// twice, e.g. re-published after a restart, is trained once). A release is verified against its
// manifest first.
func Load(ctx context.Context, cfg *Config, log *slog.Logger) ([]*schemas.Trajectory, int, error) {
	log = logs.OrDiscard(log)
	if st, err := os.Stat(filepath.Join(cfg.Dataset, manifest.FileName)); err == nil && st.Mode().IsRegular() {
		m, err := manifest.Read(cfg.Dataset)
		if err != nil {
			return nil, 0, fmt.Errorf("sft: %w", err)
		}
		if err := manifest.Verify(cfg.Dataset, m); err != nil {
			return nil, 0, fmt.Errorf("sft: release %s does not match its manifest: %w", cfg.Dataset, err)
		}
		log.Info("release verified", "name", m.Name, "rows", m.Rows, "files", len(m.Files))
	}
	ds, err := dataset.Open(cfg.Dataset)
	if err != nil {
		return nil, 0, fmt.Errorf("sft: %w", err)
	}
	// Scan yields each trajectory id once (unless the filter keeps duplicates) and counts the rest.
	var out []*schemas.Trajectory
	st, err := ds.Scan(ctx, cfg.Filter, func(t *schemas.Trajectory) error {
		out = append(out, t)
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("sft: %w", err)
	}
	dups := int(st.Duplicates)
	log.Info("dataset read", "files", st.Files, "rows_read", st.RowsRead, "selected", len(out), "duplicates", dups)
	if len(out) == 0 {
		return nil, dups, fmt.Errorf("sft: no trajectory of %s passes the filter (%d rows read)", cfg.Dataset, st.RowsRead)
	}
	return out, dups, nil
}

// plan is one optimizer step: indices into the trajectory list.
type plan struct {
	epoch int
	trajs []int
}

// schedule lays out every step of every epoch. tokens[i] is trajectory i's sequence tokens.
func schedule(tokens []int64, cfg *Config) []plan {
	var out []plan
	for e := 0; e < cfg.Epochs; e++ {
		order := make([]int, len(tokens))
		for i := range order {
			order[i] = i
		}
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(e)))
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var cur []int
		var sum int64
		for _, i := range order {
			if tokens[i] == 0 {
				continue
			}
			cur = append(cur, i)
			if sum += tokens[i]; sum >= cfg.BatchTokens {
				out = append(out, plan{epoch: e, trajs: cur})
				cur, sum = nil, 0
			}
		}
		if len(cur) > 0 {
			out = append(out, plan{epoch: e, trajs: cur})
		}
	}
	if cfg.MaxSteps > 0 && int64(len(out)) > cfg.MaxSteps {
		out = out[:cfg.MaxSteps]
	}
	return out
}

// Run trains be on the trajectories: start is the number of steps already taken (a resume from
// checkpoint.State.Step; the caller has loaded that checkpoint's weights and optimizer state).
func Run(ctx context.Context, cfg Config, be gpu.Backend, trajs []*schemas.Trajectory, start int64, log *slog.Logger) (Result, error) {
	var res Result
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	log = logs.OrDiscard(log)
	began := time.Now()
	res.Trajectories = len(trajs)
	tokens := make([]int64, len(trajs))
	var lossTokens int64
	for i, t := range trajs {
		d, err := batch.Demonstrate(t, cfg.SequenceMode, cfg.MBSpec.MaxTokensPerMB)
		if err != nil {
			return res, fmt.Errorf("sft: %w", err)
		}
		res.Oversize += d.Oversize
		tokens[i], lossTokens = d.Tokens, lossTokens+d.LossTokens // sequences are rebuilt per step: memory stays O(step)
	}
	if lossTokens == 0 {
		return res, errors.New("sft: the selected trajectories have no trainable completion token")
	}
	if res.Oversize > 0 {
		log.Warn("calls longer than mb_spec.max_tokens_per_mb left out", "calls", res.Oversize, "max_tokens_per_mb", cfg.MBSpec.MaxTokensPerMB)
	}
	plans := schedule(tokens, &cfg)
	total := int64(len(plans))
	if err := cfg.Optimizer.ValidateSchedule(total, "the run's step count (epochs × selected tokens / batch_tokens, or max_steps)"); err != nil {
		return res, fmt.Errorf("sft: optimizer: %w", err)
	}
	if start > total {
		return res, fmt.Errorf("sft: resumed at step %d but the schedule has %d steps (different dataset, filter or batch_tokens?)", start, total)
	}
	dtype, _ := gpu.ParseDType(cfg.DType)
	ckpt := &checkpoint.Manager{Dir: cfg.Out, Keep: cfg.Keep, Log: log}
	if err := ckpt.CleanTemp(); err != nil {
		return res, err
	}
	log.Info("sft schedule", "trajectories", len(trajs), "loss_tokens_per_epoch", lossTokens, "epochs", cfg.Epochs,
		"steps", total, "resume_at", start)
	step := start
	save := func(l float64) error {
		st := checkpoint.State{Version: step, Step: step, Time: time.Now().UTC(), Metrics: map[string]float64{"sft_loss": l}}
		p, err := ckpt.SaveBackend(st, be, dtype)
		if err != nil {
			return fmt.Errorf("sft: step %d: %w", step, err)
		}
		res.Checkpoint = p
		log.Info("checkpoint", "step", step, "path", p)
		return nil
	}
	var last float64
	for _, pl := range plans[start:] {
		if err := ctx.Err(); err != nil {
			if step > start { // keep what was trained
				if serr := save(last); serr != nil {
					return res, errors.Join(err, serr)
				}
			}
			return res, err
		}
		t0 := time.Now()
		var seqs []prefixtree.Sequence
		for _, i := range pl.trajs {
			d, err := batch.Demonstrate(trajs[i], cfg.SequenceMode, cfg.MBSpec.MaxTokensPerMB)
			if err != nil {
				return res, fmt.Errorf("sft: %w", err)
			}
			seqs = append(seqs, d.Seqs...)
		}
		p, err := prefixtree.Pack(seqs, cfg.MBSpec)
		if err != nil {
			return res, fmt.Errorf("sft: step %d: %w", step+1, err)
		}
		opt := cfg.Optimizer.At(step, total) // a resumed run continues the schedule at its step
		l, gradNorm, err := update(be, p, opt)
		if err != nil {
			return res, fmt.Errorf("sft: step %d: %w", step+1, err)
		}
		step++
		res.Steps++
		if res.Steps == 1 {
			res.FirstLoss = l
		}
		res.LastLoss, last = l, l
		res.LossTokens += p.LossTokens
		res.OriginalTokens += p.OriginalTokens
		res.PackedTokens += p.PackedTokens
		sec := time.Since(t0).Seconds()
		log.Info("sft step", "step", step, "of", total, "epoch", pl.epoch+1, "lr", opt.LR, "loss", l, "grad_norm", gradNorm,
			"trajectories", len(pl.trajs), "loss_tokens", p.LossTokens, "tree_token_ratio", p.TokenRatio(),
			"tokens_per_s", float64(p.OriginalTokens)/max(sec, 1e-9), "packed_tokens_per_s", float64(p.PackedTokens)/max(sec, 1e-9), "seconds", sec)
		if err := steplog.Append(cfg.Out, steplog.Record{Kind: "sft", Step: step, Version: step, Time: time.Now().UTC(), Metrics: map[string]float64{
			"loss": l, "grad_norm": gradNorm, "lr": opt.LR, "epoch": float64(pl.epoch + 1), "loss_tokens": float64(p.LossTokens),
			"original_tokens": float64(p.OriginalTokens), "packed_tokens": float64(p.PackedTokens), "step_seconds": sec,
		}}); err != nil {
			return res, err
		}
		if cfg.SaveEvery > 0 && step%cfg.SaveEvery == 0 && step < total {
			if err := save(l); err != nil {
				return res, err
			}
		}
	}
	switch {
	case step > start:
		if err := save(last); err != nil {
			return res, err
		}
	default: // resumed after the last step: nothing to do, the checkpoint is there
		res.Checkpoint = ckpt.Path(step)
		if _, err := os.Stat(res.Checkpoint); err != nil {
			return res, fmt.Errorf("sft: nothing left to train, but no checkpoint of step %d: %w", step, err)
		}
	}
	res.TotalSteps = step
	res.Elapsed = time.Since(began)
	return res, nil
}

// update runs forward, the NLL and backward over every micro-batch of one step, then AdamW. It
// returns the step's mean NLL per loss token and the pre-clip gradient norm.
func update(be gpu.Backend, p *prefixtree.Packing, opt gpu.Optimizer) (float64, float64, error) {
	obj, err := loss.New(loss.Config{Objective: loss.ObjectiveNLL})
	if err != nil {
		return 0, 0, err
	}
	var total float64
	for i, mb := range p.MicroBatches {
		logp, _, err := be.Forward(&mb.MicroBatch)
		if err != nil {
			return 0, 0, fmt.Errorf("forward of micro-batch %d: %w", i, err)
		}
		res, err := loss.Evaluate(obj, loss.Input{MB: mb, Logp: logp, N: p.LossTokens})
		if err != nil {
			return 0, 0, fmt.Errorf("micro-batch %d: %w", i, err)
		}
		total += res.Loss
		if err := be.Backward(res.DLogp); err != nil {
			return 0, 0, fmt.Errorf("backward of micro-batch %d: %w", i, err)
		}
	}
	gn, err := be.Step(opt)
	if err != nil {
		return 0, 0, fmt.Errorf("optimizer step: %w", err)
	}
	return total, gn, nil
}
