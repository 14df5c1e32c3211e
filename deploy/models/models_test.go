// Package models_test checks the model configurations shipped under deploy/models.
package models_test

import (
	"reflect"
	"testing"

	"tau2rl/gpu"
)

// TestConfigs loads every shipped config.json: a valid Qwen3 shape with the real vocabulary, and
// for qwen3-learn (trained with backend=cuda) the shapes the CUDA kernels implement.
func TestConfigs(t *testing.T) {
	for _, c := range []struct {
		dir  string
		cuda bool
	}{{"qwen3-tiny", false}, {"qwen3-learn", true}, {"qwen3-learn-100m", true}, {"qwen3-learn-200m", true}, {"qwen3-0.6b", true}, {"qwen3-1.7b", true}, {"qwen3-8b", true}} {
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

// TestRealShapes: the Qwen3-0.6B, Qwen3-1.7B and Qwen3-8B configs (the loop's and the multi-GPU
// measurements' models, docs/MULTIGPU.md) are exactly the geometries gpu.Qwen3_0_6B,
// gpu.Qwen3_1_7B and gpu.Qwen3_8B state.
func TestRealShapes(t *testing.T) {
	for _, c := range []struct {
		dir  string
		want gpu.Config
	}{{"qwen3-0.6b", gpu.Qwen3_0_6B()}, {"qwen3-1.7b", gpu.Qwen3_1_7B()}, {"qwen3-8b", gpu.Qwen3_8B()}} {
		cfg, err := gpu.LoadConfig(c.dir + "/config.json")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cfg, c.want) {
			t.Errorf("%s: %+v\nwant %+v", c.dir, cfg, c.want)
		}
	}
}
