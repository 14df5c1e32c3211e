// Package report is report.json, what a tau2-run experiment measured: its configuration, the
// demonstrations, SFT, the evaluations before and after GRPO, and the GRPO stage with where
// every produced episode went (Accounting) and the per task and policy version diagnosis
// (Diagnosis). deploy/localrun writes it and consumers/figures (tau2-eval plot report=…) reads
// it; the one type below both keeps them from drifting apart.
package report

import (
	"errors"
	"fmt"
	"time"
)

// ExperimentConfig is tau2-run experiment's configuration (its keys are the command's).
type ExperimentConfig struct {
	Bin     string `yaml:"bin"`
	Dir     string `yaml:"dir"`
	DataDir string `yaml:"data_dir"`
	// Domain and Split are the tasks of every stage (AReaL trains on airline's train split).
	Domain string `yaml:"domain"`
	Split  string `yaml:"split"`
	// TaskIDs restricts every stage to these tasks of the split (empty = the whole split).
	TaskIDs []string `yaml:"task_ids"`
	// WriteTasksOnly keeps the tasks whose expected actions change the database (default
	// true): on the others (17 of airline's 30 train tasks) no mistake of the scripted
	// demonstrator changes the reward, so they only dilute the signal.
	WriteTasksOnly bool `yaml:"write_tasks_only"`
	// Tasks keeps the first n of the selected tasks (0 = all). Demonstrations, evaluations and
	// GRPO's admission all use the same resolved list (report.json's config.task_ids).
	Tasks int `yaml:"tasks"`
	// DemoTrials is the number of demonstrations per task.
	DemoTrials int `yaml:"demo_trials"`
	// AgentErrorRate and ErrorKinds are the scripted demonstrator's injected errors. On airline's
	// 13 train tasks with a write, 0.6 with wrong arguments and skipped writes succeeds 0.413
	// (0.5: 0.490, 0.4: 0.635; 13 tasks × 8 trials, docs/LEARNING.md): the "third to a half" the
	// SFT policy should start from.
	AgentErrorRate float64  `yaml:"agent_error_rate"`
	ErrorKinds     []string `yaml:"error_kinds"`
	// Policy is "sampler" (tau2-sampler serves the trained model) or "scripted".
	Policy string `yaml:"policy"`
	// SamplerArgs are extra key=value arguments of tau2-sampler.
	SamplerArgs []string `yaml:"sampler_args"`
	// Backend is the trainer's (and sampler's) backend: cpu or cuda.
	Backend string `yaml:"backend"`
	// ModelConfig is the config.json of the randomly initialised model; ModelPath, when set, a
	// Hugging Face checkpoint to start SFT from instead.
	ModelConfig string `yaml:"model_config"`
	ModelPath   string `yaml:"model_path"`
	// SFT settings (tau2-trainer sft).
	SFTEpochs      int     `yaml:"sft_epochs"`
	SFTLR          float64 `yaml:"sft_lr"`
	SFTBatchTokens int     `yaml:"sft_batch_tokens"`
	SFTMaxSteps    int     `yaml:"sft_max_steps"`
	// GRPO settings (tau2-trainer).
	GRPOSteps int     `yaml:"grpo_steps"`
	GroupSize int     `yaml:"group_size"`
	BatchSize int     `yaml:"batch_size"`
	GRPOLR    float64 `yaml:"grpo_lr"`
	// GRPOTime ends the GRPO stage after this wall time even if fewer than grpo_steps steps were
	// taken (0 = no limit), so that a run on a rented GPU still evaluates and reports: the
	// policy server keeps the last version the trainer published, and "eval after" measures it.
	GRPOTime    time.Duration `yaml:"grpo_time"`
	MaxNewToken int           `yaml:"max_new_tokens"`
	// EvalTrials is k of pass^k; EvalTemperature the evaluation's sampling temperature.
	EvalTrials      int     `yaml:"eval_trials"`
	EvalTemperature float64 `yaml:"eval_temperature"`
	// Concurrency is how many episodes run at once.
	Concurrency int           `yaml:"concurrency"`
	Timeout     time.Duration `yaml:"timeout"`
}

// Validate checks the configuration before anything starts.
func (c *ExperimentConfig) Validate() error {
	switch {
	case c.Policy != "sampler" && c.Policy != "scripted":
		return fmt.Errorf("policy %q: want sampler or scripted", c.Policy)
	case c.Backend != "cpu" && c.Backend != "cuda":
		return fmt.Errorf("backend %q: want cpu or cuda", c.Backend)
	case c.GRPOTime < 0:
		return fmt.Errorf("grpo_time %s: want ≥ 0 (0 = until grpo_steps)", c.GRPOTime)
	case c.Tasks < 0 || c.DemoTrials < 1 || c.SFTEpochs < 1 || c.GRPOSteps < 1 || c.GroupSize < 1 || c.BatchSize < 1 ||
		c.EvalTrials < 1 || c.Concurrency < 1 || c.SFTBatchTokens < 1 || c.SFTMaxSteps < 0 || c.MaxNewToken < 1:
		return errors.New("tasks, sft_max_steps ≥ 0; demo_trials, sft_epochs, sft_batch_tokens, grpo_steps, group_size, batch_size, eval_trials, concurrency, max_new_tokens ≥ 1")
	case !(c.AgentErrorRate >= 0 && c.AgentErrorRate <= 1):
		return fmt.Errorf("agent_error_rate %v: want [0, 1]", c.AgentErrorRate)
	case c.ModelConfig == "" && c.ModelPath == "":
		return errors.New("model_config or model_path is required")
	case len(c.ErrorKinds) == 0:
		return errors.New("error_kinds: at least one of wrong_argument, skipped_write, malformed_call")
	}
	return nil
}

// Report is report.json: what each stage of the experiment measured.
type Report struct {
	Config  ExperimentConfig   `json:"config"`
	Demos   DemoStats          `json:"demonstrations"`
	SFT     SFTStats           `json:"sft"`
	Before  EvalStats          `json:"eval_before"`
	After   EvalStats          `json:"eval_after"`
	GRPO    GRPOStats          `json:"grpo"`
	Stages  map[string]float64 `json:"stage_seconds"`
	Figures []string           `json:"figures,omitempty"`
}

// DemoStats is the demonstrations: how many, their success, the release cut from them.
type DemoStats struct {
	Episodes   int     `json:"episodes"`
	MeanReward float64 `json:"mean_reward"`
	Release    string  `json:"release"`
}

// SFTStats is the SFT stage: its steps, first and last loss, the checkpoint it left.
type SFTStats struct {
	Steps      int     `json:"steps"`
	FirstLoss  float64 `json:"first_loss"`
	LastLoss   float64 `json:"last_loss"`
	Checkpoint string  `json:"checkpoint"`
}

// EvalStats is one evaluation: tau2-eval run's pass^k row for the domain.
type EvalStats struct {
	Tasks, Simulations, Infra int
	Avg                       float64
	PassK                     []float64
}

// RewardStat is the GRPO episodes that started under one policy version.
type RewardStat struct {
	Version  int64   `json:"version"`
	Episodes int     `json:"episodes"`
	Mean     float64 `json:"mean_reward"`
	Std      float64 `json:"std"`
}

// GRPOStats is the GRPO stage: steps, episodes, reward per version, the train/inference mismatch, time.
type GRPOStats struct {
	Steps    int `json:"steps"`
	Episodes int `json:"episodes"`
	// TrainedEpisodes are the episodes the steps trained on; the others of Episodes arrived
	// after their request went stale (more than max_head_offpolicyness versions behind) or
	// were still in flight when the stage ended: AReaL's admission generates ahead on purpose.
	TrainedEpisodes int          `json:"trained_episodes"`
	PerVersion      []RewardStat `json:"reward_per_version"`
	MeanAbsDiff     []float64    `json:"behav_abs_diff_per_step"`
	CapFraction     []float64    `json:"behav_cap_fraction_per_step"`
	TrainSeconds    float64      `json:"train_seconds"`
	WallSeconds     float64      `json:"wall_seconds"`
	FinalCkpt       string       `json:"final_checkpoint"`
	StepsLog        string       `json:"steps_log"`
	Dataset         string       `json:"dataset"`
	GeneratedToken  float64      `json:"generated_tokens"`
	// NoStepReason says why GRPO ended without a trainer step (empty when it took one): the
	// trainer's groups by outcome and its last "waiting for groups" line.
	NoStepReason string `json:"no_step_reason,omitempty"`
	// Accounting is where every produced episode went; Diagnosis the per task and per policy
	// version view (success, groups of equal rewards, advantages, output length, failures).
	Accounting Accounting `json:"accounting"`
	Diagnosis  Diagnosis  `json:"diagnosis"`
}
