//go:build cuda

package dp

// The scaling measurement of issue 16 (docs/MULTIGPU.md "Measuring on several GPUs"):
//
//	go test -tags cuda -run '^$' -bench DataParallelStep -benchtime 1x ./gpu/dp/
//	(or .devbin/dp.test -test.run '^$' -test.bench DataParallelStep -test.benchtime 1x)
//
// Environment:
//
//	T2_DP_MODEL           config.json of the model (default: the Qwen3-1.7B geometry)
//	T2_DP_TOKENS_PER_GPU  tree nodes per GPU per step (default 16384)
//	T2_DP_DEVICES         configurations run one after the other in this process, separated by
//	                      ';' or spaces, each a comma-separated list of CUDA ordinals (default
//	                      "0;0,1": one GPU, then two); a list needing more devices than are
//	                      visible is reported and skipped
//	T2_DP_SHAPES          micro-batch shapes, comma-separated: tree (τ²-shaped prefix tree, the
//	                      trainer's packing) and chain (one causal sequence, all nodes scored: the
//	                      workload of gpu/dp/pytorch/fsdp2_bench.py); default "tree,chain"
//	T2_DP_WARMUP, T2_DP_STEPS  warm-up and timed steps (default 2 and 6; at least 5 timed)
//	T2_DP_RECOMPUTE       cuda.recompute (default 1, as deploy/config's 1.7B trainer)
//
// Each configuration prints one line "DPSCALE {json}" per shape (the fields of scaleRecord), the
// same line format the FSDP2 script prints, and progress lines before it.

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective/nccl"
	"tau2rl/gpu/cuda"
)

// BenchmarkDataParallelStep measures full training steps (forward, backward, collective optimizer
// step) of a data-parallel Group over each device list of T2_DP_DEVICES, at a fixed number of
// tokens per GPU (weak scaling), and prints a DPSCALE line per configuration and shape with
// tokens/s, MFU per GPU, peak device memory and the scaling efficiency against the one-GPU line
// of the same run. See the top of this file for the settings.
func BenchmarkDataParallelStep(b *testing.B) {
	s, err := readScaleSettings()
	if err != nil {
		b.Fatal(err)
	}
	have, err := cuda.DeviceCount()
	if err != nil || have == 0 {
		b.Skipf("no CUDA device (%v)", err)
	}
	if os.Getenv("NCCL_NVLS_ENABLE") != "0" {
		os.Setenv("NCCL_NVLS_ENABLE", "0") // never NVLink SHARP multicast (docs/MULTIGPU.md)
	}
	ver, _ := nccl.Version()
	info, _ := cuda.Device(0)
	fmt.Printf("dp-scale: %s, %.3g parameters; %d tokens per GPU; shapes %v; recompute %v; %d warm-up + %d timed steps; %d × %s visible; NCCL %d\n",
		s.model, float64(s.cfg.NumParams()), s.tokens, s.shapes, s.recompute, s.warmup, s.steps, have, info.Name, ver)
	WriteMemoryTable(os.Stdout, s.model, s.cfg, "cuda", []int{1, 2, 8})
	var w *gpu.Weights
	base := map[string]float64{} // shape → one-GPU tokens/s
	for _, devs := range s.devices {
		rec := scaleRecord{Impl: "tau2rl-go", Model: s.model, Params: s.cfg.NumParams(), Devices: devs, World: len(devs),
			DeviceName: info.Name, TokensPerGPU: s.tokens, Recompute: s.recompute, NCCL: ver}
		fail := func(shape, msg string) {
			r := rec
			r.Shape, r.Error = shape, msg
			fmt.Printf("dp-scale: devices %v: %s\n", devs, msg)
			printRecord(r)
		}
		if slices.Max(devs) >= have {
			fail(strings.Join(s.shapes, ","), fmt.Sprintf("skipped: needs device %d, %d visible", slices.Max(devs), have))
			continue
		}
		if v := memoryVerdict(s.cfg, len(devs), info.TotalBytes); v != "" {
			fail(strings.Join(s.shapes, ","), "skipped: "+v)
			continue
		}
		if w == nil {
			t0 := time.Now()
			if w, err = gpu.NewPoolWeights(s.cfg, 1); err != nil {
				b.Fatal(err)
			}
			fmt.Printf("dp-scale: random weights in %.1f s\n", time.Since(t0).Seconds())
		}
		opt := cuda.DefaultOptions()
		opt.Recompute = s.recompute
		t0 := time.Now()
		g, err := newNCCLGroup(w, opt, devs)
		if err != nil {
			fail(strings.Join(s.shapes, ","), "building the group: "+err.Error())
			continue
		}
		fmt.Printf("dp-scale: devices %v: %d ranks built in %.1f s\n", devs, len(devs), time.Since(t0).Seconds())
		for _, shape := range s.shapes {
			r := scaleOne(g, s, shape, rec, func(r *scaleRecord) {
				// The backend allocates activations up to its largest micro-batch and keeps them,
				// so what is in use after the timed steps (cudaMemGetInfo: context, cuBLAS, NCCL
				// included) is the peak of the steps; the construction's transient (cuda.New before
				// Shard) is not in it.
				for i, be := range g.Backends() {
					if d, err := cuda.Device(devs[i]); err == nil {
						r.PeakMemGB = max(r.PeakMemGB, float64(d.TotalBytes-d.FreeBytes)/1e9)
					}
					r.HeldGB = max(r.HeldGB, float64(be.(*cuda.Backend).HeldBytes())/1e9)
				}
			})
			if r.Error == "" {
				if len(devs) == 1 {
					base[shape] = r.TokensPerS
				} else if one := base[shape]; one > 0 {
					r.ScalingEff = r.TokensPerS / (float64(len(devs)) * one)
				}
			}
			printRecord(r)
		}
		if err := g.Close(); err != nil {
			fmt.Printf("dp-scale: close: %v\n", err)
		}
	}
}

// printRecord prints one DPSCALE line (the format gpu/dp/dpscale_summary.py reads).
func printRecord(r scaleRecord) {
	j, _ := json.Marshal(r)
	fmt.Printf("DPSCALE %s\n", j)
}
