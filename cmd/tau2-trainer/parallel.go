package main

import (
	"errors"
	"fmt"
	"sync"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/dp"

	"tau2rl/cmd/internal/cli"
)

// ParallelConfig turns on data parallelism (gpu/dp, docs/MULTIGPU.md): one process drives every
// GPU of its host, one goroutine per GPU, and stays one member of the trajectories consumer group.
type ParallelConfig struct {
	// Devices are the CUDA device ordinals this process trains on, one data-parallel rank each
	// (backend cuda; NCCL between them). Empty: one GPU, cuda.device, no data parallelism.
	Devices []int `yaml:"devices"`
	// Ranks is the number of in-process ranks of the cpu backend (goroutines, collectives in
	// memory): the same code path as several GPUs, for smoke runs and tests. 0 or 1: none.
	Ranks int `yaml:"ranks"`
	// ShardParameters also shards the working weights (ZeRO-3: each layer gathered right before
	// use). Only the cpu backend implements it so far (docs/MULTIGPU.md); 1.7B and 8B on 80 GB
	// GPUs do not need it. Default false.
	ShardParameters bool `yaml:"shard_parameters"`
	// Hosts is the number of hosts of the world. Default 1. Several hosts are not supported yet:
	// the followers' step feed is missing (docs/MULTIGPU.md, "Several hosts").
	Hosts int `yaml:"hosts"`
}

// enabled reports whether the trainer runs a dp.Group.
func (p ParallelConfig) enabled() bool { return len(p.Devices) > 0 || p.Ranks > 1 }

// validate checks the parallel settings against the backend and the checkpoint dtype.
func (p ParallelConfig) validate(backend, dtype string) error {
	switch {
	case len(p.Devices) > 0 && dtype != string(gpu.BF16):
		return fmt.Errorf("parallel.devices needs checkpoint.dtype bfloat16 (got %q): a CUDA rank holds its weights whole only in bf16, the fp32 masters are in the sharded optimizer state", dtype)
	case p.ShardParameters && !p.enabled():
		return fmt.Errorf("parallel.shard_parameters needs parallel.devices or parallel.ranks")
	case p.Hosts > 1:
		return fmt.Errorf("parallel.hosts %d: training across several hosts is not supported yet (docs/MULTIGPU.md); use the GPUs of one host", p.Hosts)
	case p.Hosts < 0 || p.Ranks < 0:
		return fmt.Errorf("parallel.hosts %d and parallel.ranks %d must be ≥ 0", p.Hosts, p.Ranks)
	case len(p.Devices) > 0 && backend != "cuda":
		return fmt.Errorf("parallel.devices is for backend cuda (backend is %q; the cpu backend takes parallel.ranks)", backend)
	case p.Ranks > 1 && backend != "cpu":
		return fmt.Errorf("parallel.ranks is for backend cpu (backend is %q; cuda takes parallel.devices)", backend)
	}
	seen := map[int]bool{}
	for _, d := range p.Devices {
		if d < 0 || seen[d] {
			return fmt.Errorf("parallel.devices %v: each device once, ordinals ≥ 0", p.Devices)
		}
		seen[d] = true
	}
	return nil
}

// rankCount is the number of local ranks.
func (p ParallelConfig) rankCount() int {
	if len(p.Devices) > 0 {
		return len(p.Devices)
	}
	return p.Ranks
}

// openParallel builds one backend per local rank with build (concurrently: each loads the same
// weights onto its own GPU), joins them through the backend's communicator and returns the
// data-parallel group; the caller restores a checkpoint's optimizer state into it (shards of any
// world size, or a one-GPU optimizer.safetensors).
func openParallel(cfg *Config, rt *cli.Runtime, f backendFactory, build func(rank int) (gpu.Backend, error)) (gpu.Backend, error) {
	if f.comms == nil {
		return nil, fmt.Errorf("%w: backend %q has no collectives for data parallelism", cli.ErrUsage, cfg.Backend)
	}
	n := cfg.Parallel.rankCount()
	bes := make([]gpu.Backend, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { bes[r], errs[r] = build(r) })
	}
	wg.Wait()
	closeAll := func() {
		for _, be := range bes {
			if be != nil {
				be.Close()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, err
	}
	comms, err := f.comms(cfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	g, err := dp.New(bes, comms, dp.Options{ShardParameters: cfg.Parallel.ShardParameters})
	if err != nil {
		closeAll()
		for _, c := range comms {
			c.Close()
		}
		return nil, err
	}
	level := dp.ShardOptimizer
	if cfg.Parallel.ShardParameters {
		level = dp.ShardParameters
	}
	if m, err := dp.MemoryModel(g.Config(), g.Config().NumParams(), cfg.Backend, g.World(), level); err == nil {
		rt.Log.Info("data parallel", "ranks", g.World(), "devices", cfg.Parallel.Devices,
			"param_optimizer_bytes_per_rank", m.Bytes, "bytes_per_param", m.BytesPerParam())
	}
	return g, nil
}

// localComms is the in-process communicator of the cpu backend's ranks.
func localComms(c *Config) ([]collective.Comm, error) {
	return collective.NewLocal(c.Parallel.rankCount())
}
