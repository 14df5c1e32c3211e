package report

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestExperimentConfigValidate: every knob that can start a run that cannot work is refused
// before anything starts, naming the key.
func TestExperimentConfigValidate(t *testing.T) {
	good := func() ExperimentConfig {
		return ExperimentConfig{Policy: "sampler", Backend: "cuda", ModelConfig: "m.json", ErrorKinds: []string{"wrong_argument"},
			DemoTrials: 1, SFTEpochs: 1, SFTBatchTokens: 1, GRPOSteps: 1, GroupSize: 1, BatchSize: 1, EvalTrials: 1,
			Concurrency: 1, MaxNewToken: 1, GRPOTemperature: 1, Offpolicyness: 2, Timeout: time.Minute, GPUs: 1, Samplers: 1}
	}
	one, nan := 1.0, math.NaN()
	for _, c := range []struct {
		name string
		edit func(*ExperimentConfig)
		want string // "" = valid
	}{
		{"defaults", func(*ExperimentConfig) {}, ""},
		{"throughput run without evaluations", func(c *ExperimentConfig) { c.EvalTrials = 0 }, ""},
		{"synchronous", func(c *ExperimentConfig) { c.Offpolicyness = 0 }, ""},
		{"rejection-sampled SFT", func(c *ExperimentConfig) { c.SFTMinReward = &one }, ""},
		{"negative offpolicyness", func(c *ExperimentConfig) { c.Offpolicyness = -1 }, "offpolicyness"},
		{"negative eval_trials", func(c *ExperimentConfig) { c.EvalTrials = -1 }, "eval_trials"},
		{"negative warm-up", func(c *ExperimentConfig) { c.GRPOWarmup = -1 }, "grpo_warmup_steps"},
		{"greedy rollouts", func(c *ExperimentConfig) { c.GRPOTemperature = 0 }, "grpo_temperature"},
		{"NaN temperature", func(c *ExperimentConfig) { c.GRPOTemperature = nan }, "grpo_temperature"},
		{"NaN min reward", func(c *ExperimentConfig) { c.SFTMinReward = &nan }, "sft_min_reward"},
		{"unknown policy", func(c *ExperimentConfig) { c.Policy = "vllm" }, "policy"},
		{"no model", func(c *ExperimentConfig) { c.ModelConfig = "" }, "model_config"},
		{"error rate", func(c *ExperimentConfig) { c.AgentErrorRate = 2 }, "agent_error_rate"},
		{"two samplers sharing one GPU", func(c *ExperimentConfig) { c.Samplers = 2 }, ""},
		{"3 samplers + 1 trainer GPU", func(c *ExperimentConfig) { c.GPUs, c.Samplers = 4, 3 }, ""},
		{"2 samplers + 2 trainer ranks", func(c *ExperimentConfig) { c.GPUs, c.Samplers = 4, 2 }, ""},
		{"3 trainer ranks, batch of one group", func(c *ExperimentConfig) { c.GPUs, c.Samplers, c.BatchSize = 4, 1, 1 }, ""},
		{"no trainer GPU", func(c *ExperimentConfig) { c.GPUs, c.Samplers = 4, 4 }, "samplers ≤ 3"},
		{"zero gpus (unset)", func(c *ExperimentConfig) { c.GPUs = 0 }, "gpus"},
		{"zero samplers", func(c *ExperimentConfig) { c.Samplers = 0 }, "samplers"},
		{"cpu backend on GPUs", func(c *ExperimentConfig) { c.Backend, c.GPUs = "cpu", 2 }, "runs on no GPU"},
		{"cpu backend, two samplers", func(c *ExperimentConfig) { c.Backend, c.Samplers = "cpu", 2 }, ""},
		{"scripted policy, samplers", func(c *ExperimentConfig) { c.Policy, c.Samplers = "scripted", 2 }, "no sampler to place"},
		{"scripted policy, gpus", func(c *ExperimentConfig) { c.Policy, c.GPUs = "scripted", 2 }, "no sampler to place"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := good()
			c.edit(&cfg)
			err := cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted, want an error naming %s", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q does not name %s", err, c.want)
			}
		})
	}
}
