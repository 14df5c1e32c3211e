//go:build !cuda

package main

import (
	"errors"

	"tau2rl/gpu"
)

// Without the cuda tag, backend=cuda is a clear error instead of an unknown name.
func init() {
	backends["cuda"] = func(*gpu.Weights, *Config) (gpu.Decoder, error) {
		return nil, errors.New("this tau2-sampler was built without CUDA; build it with `make gpu-sampler`")
	}
}
