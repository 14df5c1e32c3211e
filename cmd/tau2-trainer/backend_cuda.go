//go:build cuda

package main

import (
	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/collective/nccl"
	"tau2rl/gpu/cuda"
)

// The CUDA backend exists only in binaries built with -tags cuda (it links the kernels).
func init() {
	backends["cuda"] = backendFactory{
		load: func(dir string, c *Config) (gpu.Backend, error) { return cuda.Load(dir, c.CUDA) },
		random: func(mc gpu.Config, seed uint64, c *Config) (gpu.Backend, error) {
			return cuda.NewRandom(mc, seed, c.CUDA)
		},
		// A data-parallel rank is built as its shard: the whole fp32 optimizer state of 8B
		// (137 GiB) fits no single GPU.
		shard: func(w *gpu.Weights, c *Config, rank, world int) (gpu.Backend, error) {
			return cuda.NewShard(w, c.CUDA, rank, world)
		},
		// One process drives its host's GPUs: one NCCL communicator per device, made here.
		comms: func(c *Config) ([]collective.Comm, error) {
			id, err := nccl.UniqueID()
			if err != nil {
				return nil, err
			}
			return nccl.NewHost(id, 0, len(c.Parallel.Devices), c.Parallel.Devices)
		},
		// Several hosts (untested: no multi-host machine yet): host 0 makes the id and sends it
		// in the step feed's welcome; every host joins its devices as its block of global ranks.
		commID: func(*Config) ([]byte, error) { return nccl.UniqueID() },
		hostComms: func(c *Config, id []byte, firstRank, world int) ([]collective.Comm, error) {
			return nccl.NewHost(id, firstRank, world, c.Parallel.Devices)
		},
	}
}
