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
		// One process drives its host's GPUs: one NCCL communicator per device, made here.
		comms: func(c *Config) ([]collective.Comm, error) {
			id, err := nccl.UniqueID()
			if err != nil {
				return nil, err
			}
			return nccl.NewHost(id, 0, len(c.Parallel.Devices), c.Parallel.Devices)
		},
	}
}
