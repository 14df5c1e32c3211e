package step

import (
	"fmt"
	"time"

	"tau2rl/gpu"
	"tau2rl/trainer/admission"
	"tau2rl/trainer/advantage"
	"tau2rl/trainer/batch"
	"tau2rl/trainer/group"
	"tau2rl/trainer/loss"
	"tau2rl/trainer/prefixtree"
)

// ActorConfig holds the policy-update settings, named as AReaL's actor.* keys where they exist.
type ActorConfig struct {
	// Optimizer is AdamW (actor.optimizer.lr, …). Default gpu.DefaultOptimizer (AReaL τ² 1.7B).
	Optimizer gpu.Optimizer `yaml:"optimizer"`
	// Config holds the objective (actor.objective: "ppo", the default, or any objective
	// registered in trainer/loss) and PPO's eps_clip, eps_clip_higher and behav_imp_weight_cap
	// (actor.eps_clip, …).
	loss.Config `yaml:",inline"`
	// MBSpec is the micro-batch budget (actor.mb_spec.max_tokens_per_mb).
	MBSpec prefixtree.Config `yaml:"mb_spec"`
	// Advantage selects the advantage estimator and the group filter.
	Advantage advantage.Config `yaml:"advantage"`
	// PPONMinibatches splits a step's micro-batches into this many optimizer updates, all against
	// the same proximal log-probs. Default 1 (AReaL τ²).
	PPONMinibatches int `yaml:"ppo_n_minibatches"`
	// RecomputeLogprob recomputes proximal log-probs with a forward pass before the update, as
	// AReaL does. With one minibatch the proximal policy is the current one, so false reuses the
	// training forward's log-probs (detached) and saves a third of the compute; the loss and
	// gradient are identical up to forward-pass non-determinism. Default true.
	RecomputeLogprob bool `yaml:"recompute_logprob"`
}

// CheckpointConfig controls checkpoints, commits, weight reloads and version publishing, which
// happen together every Every steps.
type CheckpointConfig struct {
	// Dir is the checkpoint root (checkpoints/v<N>/). Default "checkpoints".
	Dir string `yaml:"dir"`
	// Every is the number of steps between checkpoints. Default 1 (AReaL updates the servers'
	// weights every step).
	Every int `yaml:"every"`
	// Keep is how many readable checkpoints to keep on disk (unreadable ones are never counted
	// nor deleted: trainer/checkpoint). Default 3.
	Keep int `yaml:"keep"`
	// DType is the saved tensor type (bfloat16, float16, float32). Default bfloat16.
	DType string `yaml:"dtype"`
	// StartFresh lets tau2-trainer start from the initial model (model.path or random weights)
	// when Dir holds checkpoints but none is readable; without it the trainer refuses to start,
	// because starting over silently discards the training and republishes version 1. It never
	// overrides a readable checkpoint. Default false.
	StartFresh bool `yaml:"start_fresh"`
}

// Config configures the trainer loop.
type Config struct {
	// BatchSize is B, the groups per training step (AReaL train_dataset.batch_size). Default 16.
	BatchSize int `yaml:"batch_size"`
	// MaxHeadOffpolicyness bounds staleness in policy versions: samples older than this are
	// dropped, and admission keeps in-flight work within it. Default 2 (AReaL τ²).
	MaxHeadOffpolicyness int64 `yaml:"max_head_offpolicyness"`
	// MaxSteps stops the trainer after this many steps (0 = run until stopped).
	MaxSteps int64 `yaml:"max_steps"`
	// Group configures grouping (group.group_size, group.timeout, …).
	Group group.Config `yaml:"group"`
	// Sequences selects per-call or per-conversation sequences and the reward source.
	Sequences batch.Config `yaml:"sequences"`
	// Actor holds the optimizer, loss, packing and advantage settings.
	Actor ActorConfig `yaml:"actor"`
	// Checkpoint configures checkpoints and publishing.
	Checkpoint CheckpointConfig `yaml:"checkpoint"`
	// Admission configures rollout-request issuing.
	Admission admission.Config `yaml:"admission"`
	// Tick is how often incomplete groups and requests are checked for timeouts. Default 1s.
	Tick time.Duration `yaml:"tick"`
}

// DefaultConfig returns AReaL's τ² settings for Qwen3-1.7B where they apply.
func DefaultConfig() Config {
	return Config{
		BatchSize:            16,
		MaxHeadOffpolicyness: 2,
		Group:                group.DefaultConfig(),
		Sequences:            batch.DefaultConfig(),
		Actor: ActorConfig{
			Optimizer:        gpu.DefaultOptimizer(),
			Config:           loss.DefaultConfig(),
			MBSpec:           prefixtree.DefaultConfig(),
			Advantage:        advantage.DefaultConfig(),
			PPONMinibatches:  1,
			RecomputeLogprob: true,
		},
		Checkpoint: CheckpointConfig{Dir: "checkpoints", Every: 1, Keep: 3, DType: string(gpu.BF16)},
		Admission:  admission.DefaultConfig(),
		Tick:       time.Second,
	}
}

// Validate checks every part of the configuration.
func (c *Config) Validate() error {
	switch {
	case c.BatchSize < 1:
		return fmt.Errorf("step: batch_size must be ≥ 1, got %d", c.BatchSize)
	case c.MaxHeadOffpolicyness < 0:
		return fmt.Errorf("step: max_head_offpolicyness must be ≥ 0, got %d", c.MaxHeadOffpolicyness)
	case c.MaxSteps < 0:
		return fmt.Errorf("step: max_steps must be ≥ 0, got %d", c.MaxSteps)
	case c.Actor.PPONMinibatches < 1:
		return fmt.Errorf("step: actor.ppo_n_minibatches must be ≥ 1, got %d", c.Actor.PPONMinibatches)
	case !c.Actor.RecomputeLogprob && c.Actor.PPONMinibatches > 1:
		return fmt.Errorf("step: actor.recompute_logprob=false needs ppo_n_minibatches=1 (later minibatches need the pre-update log-probs)")
	case c.Checkpoint.Dir == "":
		return fmt.Errorf("step: checkpoint.dir is empty")
	case c.Checkpoint.Every < 1 || c.Checkpoint.Keep < 1:
		return fmt.Errorf("step: checkpoint.every (%d) and checkpoint.keep (%d) must be ≥ 1", c.Checkpoint.Every, c.Checkpoint.Keep)
	case c.Tick <= 0:
		return fmt.Errorf("step: tick must be > 0, got %s", c.Tick)
	}
	if _, err := gpu.ParseDType(c.Checkpoint.DType); err != nil {
		return fmt.Errorf("step: checkpoint.dtype: %w", err)
	}
	for _, v := range []interface{ Validate() error }{c.Group, c.Sequences, c.Actor.Config, c.Actor.MBSpec, c.Actor.Advantage, c.Actor.Optimizer} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	// The schedule decays over max_steps (trainer steps; the minibatches of one step share its rate).
	if err := c.Actor.Optimizer.ValidateSchedule(c.MaxSteps, "max_steps"); err != nil {
		return fmt.Errorf("step: actor.optimizer: %w", err)
	}
	return nil
}
