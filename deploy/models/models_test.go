// Package models_test checks the model configurations shipped under deploy/models.
package models_test

import (
	"testing"

	"tau2rl/gpu"
)

// TestConfigs loads every shipped config.json: a valid Qwen3 shape with the real vocabulary, and
// for qwen3-learn (trained with backend=cuda) the shapes the CUDA kernels implement.
func TestConfigs(t *testing.T) {
	for _, c := range []struct {
		dir  string
		cuda bool
	}{{"qwen3-tiny", false}, {"qwen3-learn", true}} {
		cfg, err := gpu.LoadConfig(c.dir + "/config.json")
		if err != nil {
			t.Fatalf("%s: %v", c.dir, err)
		}
		if cfg.VocabSize != 151936 {
			t.Errorf("%s: vocab_size %d, want Qwen3's 151936", c.dir, cfg.VocabSize)
		}
		if c.cuda && (cfg.HeadDim != 64 && cfg.HeadDim != 128 || cfg.HiddenSize%8 != 0 || cfg.IntermediateSize%8 != 0) {
			t.Errorf("%s: head_dim %d, hidden %d, intermediate %d: not a shape the CUDA kernels implement", c.dir, cfg.HeadDim, cfg.HiddenSize, cfg.IntermediateSize)
		}
	}
}
