//go:build cuda

package main

import (
	"tau2rl/gpu"
	"tau2rl/gpu/cuda"
)

// The CUDA decoder exists only in binaries built with -tags cuda (make gpu-sampler). Without
// kv.blocks the cache takes kv.memory_fraction of the memory left after the weights.
func init() {
	backends["cuda"] = func(w *gpu.Weights, c *Config) (gpu.Decoder, error) {
		n := c.KV.Blocks
		if n == 0 {
			var err error
			if n, err = cuda.KVBlocksForMemory(w.Config, c.KV.BlockSize, c.KV.MemoryFraction); err != nil {
				return nil, err
			}
		}
		d, err := cuda.NewDecoder(w, gpu.KVCacheSpec{BlockSize: c.KV.BlockSize, NumBlocks: n})
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return d, nil
	}
}
