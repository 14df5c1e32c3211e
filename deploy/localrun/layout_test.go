package localrun

import (
	"reflect"
	"strings"
	"testing"
)

// TestLayoutFor: which devices each process of the GRPO stage sees, the trainer's data-parallel
// ranks, the samplers' KV-cache share and perf.json's layout name, for the one-GPU default (no
// environment added: tau2-run's behaviour before gpus existed), samplers sharing it, the issue's
// 4-GPU layouts and a host whose CUDA_VISIBLE_DEVICES already confines the run.
func TestLayoutFor(t *testing.T) {
	cfg := func(backend string, gpus, samplers int) ExperimentConfig {
		c := DefaultExperimentConfig()
		c.Backend, c.GPUs, c.Samplers = backend, gpus, samplers
		return c
	}
	env := func(d string) []string { return []string{"CUDA_VISIBLE_DEVICES=" + d} }
	for _, c := range []struct {
		name    string
		cfg     ExperimentConfig
		visible string
		want    layout
	}{
		{"default: one GPU shared", DefaultExperimentConfig(), "",
			layout{Name: "1gpu-shared", GPUs: 1, TrainerRanks: 1, Samplers: []placement{{}},
				SamplerArgs: [][]string{{"kv.memory_fraction=0.3"}}}},
		{"two samplers share the GPU's 30%", cfg("cuda", 1, 2), "",
			layout{Name: "1gpu-shared-2sampler", GPUs: 1, TrainerRanks: 1, Samplers: []placement{{}, {}},
				SamplerArgs: [][]string{{"kv.memory_fraction=0.15"}, {"kv.memory_fraction=0.15"}}}},
		{"cpu backend, two samplers", cfg("cpu", 1, 2), "",
			layout{Name: "cpu", GPUs: 0, TrainerRanks: 1, Samplers: []placement{{}, {}}, SamplerArgs: [][]string{nil, nil}}},
		{"4 GPUs: 3 samplers + 1 trainer", cfg("cuda", 4, 3), "",
			layout{Name: "4gpu-3sampler-1trainer", GPUs: 4, TrainerRanks: 1,
				Samplers:    []placement{{"0", env("0")}, {"1", env("1")}, {"2", env("2")}},
				SamplerArgs: [][]string{nil, nil, nil},
				Trainer:     placement{"3", env("3")}}},
		{"4 GPUs: 2 samplers + 2 trainer ranks", cfg("cuda", 4, 2), "",
			layout{Name: "4gpu-2sampler-2trainer", GPUs: 4, TrainerRanks: 2,
				Samplers:    []placement{{"0", env("0")}, {"1", env("1")}},
				SamplerArgs: [][]string{nil, nil},
				Trainer:     placement{"2,3", env("2,3")}, TrainerArgs: []string{"parallel.devices=[0,1]"}}},
		{"2 GPUs inside CUDA_VISIBLE_DEVICES=4,5,6", cfg("cuda", 2, 1), "4, 5,6",
			layout{Name: "2gpu-1sampler-1trainer", GPUs: 2, TrainerRanks: 1,
				Samplers: []placement{{"4", env("4")}}, SamplerArgs: [][]string{nil},
				Trainer: placement{"5", env("5")}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := layoutFor(c.cfg, c.visible)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("layoutFor:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
	for _, c := range []struct {
		name    string
		cfg     ExperimentConfig
		visible string
		want    string
	}{
		{"fewer visible devices than gpus", cfg("cuda", 4, 3), "0,1", "names only 2 devices"},
		{"no GPU left for the trainer", cfg("cuda", 2, 2), "", "trainer needs at least one GPU"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := layoutFor(c.cfg, c.visible); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want %q", err, c.want)
			}
		})
	}
}

// TestEndpoints: policy.endpoints and reload.endpoints list every sampler, in start order.
func TestEndpoints(t *testing.T) {
	if got := endpoints([]string{"127.0.0.1:1", "127.0.0.1:2"}); got != "[http://127.0.0.1:1,http://127.0.0.1:2]" {
		t.Errorf("endpoints: %s", got)
	}
	if samplerName(0) != "sampler" || samplerName(2) != "sampler-2" {
		t.Errorf("sampler names %s %s", samplerName(0), samplerName(2))
	}
}
