package localrun

import (
	"reflect"
	"strconv"
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
			layout{Name: "cpu-2sampler", GPUs: 0, TrainerRanks: 1, Samplers: []placement{{}, {}}, SamplerArgs: [][]string{nil, nil}}},
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

// TestLayoutProcessArgs: what each process of the GRPO stage is started with, per layout,
// without starting anything: every sampler's arguments (its KV-cache share ahead of
// sampler_args, so a user's setting wins), the trainer's reload.endpoints listing every sampler
// with the layout's parallel.devices ahead of trainer_args, and the producer's and the
// evaluations' policy.endpoints listing every sampler in start order.
func TestLayoutProcessArgs(t *testing.T) {
	has := func(args []string, want string) bool {
		for _, a := range args {
			if a == want {
				return true
			}
		}
		return false
	}
	index := func(args []string, want string) int {
		for i, a := range args {
			if a == want {
				return i
			}
		}
		return -1
	}
	for _, c := range []struct {
		name              string
		gpus, samplers    int
		samplerArgs       []string
		trainerArgs       []string
		wantSampler       [][]string // per sampler, the arguments after model, listen, backend
		wantDevices       string     // the trainer's parallel.devices argument ("" = none)
		wantTrainerEnv    []string
		wantSamplerDevice []string
	}{
		{"one GPU, defaults", 1, 1, nil, nil, [][]string{{"kv.memory_fraction=0.3"}}, "", nil, []string{""}},
		{"one GPU, the user's KV share wins", 1, 1, []string{"kv.memory_fraction=0.08"}, nil,
			[][]string{{"kv.memory_fraction=0.3", "kv.memory_fraction=0.08"}}, "", nil, []string{""}},
		{"3+1", 4, 3, nil, nil, [][]string{nil, nil, nil}, "", []string{"CUDA_VISIBLE_DEVICES=3"}, []string{"0", "1", "2"}},
		{"2+2, trainer_args after the layout's", 4, 2, nil, []string{"parallel.devices=[1]"}, [][]string{nil, nil}, "parallel.devices=[0,1]",
			[]string{"CUDA_VISIBLE_DEVICES=2,3"}, []string{"0", "1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultExperimentConfig()
			cfg.GPUs, cfg.Samplers, cfg.SamplerArgs = c.gpus, c.samplers, c.samplerArgs
			cfg.TrainerArgs = append(cfg.TrainerArgs, c.trainerArgs...)
			l, err := layoutFor(cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			e := &experiment{cfg: cfg, layout: l, dir: "/run", brokers: "kafka.brokers=[b:1]", llmAddr: "llm:1"}
			e.rep.SFT.Checkpoint = "/run/sft/v1"
			var urls []string
			for i := range c.samplers {
				addr := "127.0.0.1:" + strconv.Itoa(9000+i)
				e.policyAddrs = append(e.policyAddrs, addr)
				urls = append(urls, "http://"+addr)
				got := e.samplerArgs(i, addr)
				want := append([]string{"model=/run/sft/v1", "listen=" + addr, "backend=cuda"}, c.wantSampler[i]...)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("sampler %d: %q, want %q", i, got, want)
				}
				if d := l.Samplers[i].Devices; d != c.wantSamplerDevice[i] {
					t.Errorf("sampler %d on devices %q, want %q", i, d, c.wantSamplerDevice[i])
				}
			}
			list := "[" + strings.Join(urls, ",") + "]"
			tr := e.trainerArgs("/run/ckpt")
			if !has(tr, "reload.endpoints="+list) {
				t.Errorf("trainer: no reload.endpoints=%s in %q", list, tr)
			}
			if c.wantDevices != "" {
				if i, j := index(tr, c.wantDevices), index(tr, c.trainerArgs[0]); i < 0 || j < i {
					t.Errorf("trainer: %s must come before trainer_args' %s: %q", c.wantDevices, c.trainerArgs[0], tr)
				}
			} else if strings.Contains(strings.Join(tr, " "), "parallel.") {
				t.Errorf("trainer on one device with parallel settings: %q", tr)
			}
			if !reflect.DeepEqual(l.Trainer.Env, c.wantTrainerEnv) {
				t.Errorf("trainer env %q, want %q", l.Trainer.Env, c.wantTrainerEnv)
			}
			if p := e.producerArgs(); !has(p, "policy.endpoints="+list) {
				t.Errorf("producer: no policy.endpoints=%s in %q", list, p)
			}
			if ev := e.evalArgs("before", "train", []string{"1"}, 1); !has(ev, "policy.endpoints="+list) {
				t.Errorf("eval: no policy.endpoints=%s in %q", list, ev)
			}
		})
	}
}
