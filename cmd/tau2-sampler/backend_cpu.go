package main

import (
	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
)

// The pure-Go decoder is always available; its cache is sized in tokens (kv.cpu_tokens) since
// host memory is not the constraint memory_fraction describes.
func init() {
	backends["cpu"] = func(w *gpu.Weights, c *Config) (gpu.Decoder, error) {
		n := c.KV.Blocks
		if n == 0 {
			n = (c.KV.CPUTokens + c.KV.BlockSize - 1) / c.KV.BlockSize
		}
		d, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: c.KV.BlockSize, NumBlocks: n})
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return d, nil
	}
}
