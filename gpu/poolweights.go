package gpu

import "math/rand/v2"

// NewPoolWeights fills a model of cfg for timing runs: every matrix element a normal value (std
// initializer_range, 0.02 when unset) copied from one pool of 2^20 draws starting at a different
// offset per tensor, norm weights 1. Random enough for throughput measurements (no zeros, no
// denormals, nothing a kernel could exploit) and seconds for billions of parameters, where
// NewRandomWeights draws each element (about a minute for Qwen3-1.7B on one core). It is not an
// initialisation to train from: values repeat with period 2^20. The GPU benchmarks (gpu/cuda,
// gpu/dp) use it.
func NewPoolWeights(cfg Config, seed uint64) (*Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	std := cfg.InitializerRange
	if !(std > 0) {
		std = 0.02
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	pool := make([]float32, 1<<20)
	for i := range pool {
		pool[i] = float32(std * rng.NormFloat64())
	}
	w := &Weights{Config: cfg, Tensors: map[string][]float32{}}
	for k, s := range ParamSpecs(cfg) {
		t := make([]float32, s.Size())
		if s.Norm {
			for i := range t {
				t[i] = 1
			}
		} else {
			start := (k * 7919) % len(pool)
			for i := 0; i < len(t); {
				i += copy(t[i:], pool[start:])
				start = 0
			}
		}
		w.Tensors[s.Name] = t
	}
	return w, nil
}
