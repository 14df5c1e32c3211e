package cpu

import (
	"errors"
	"fmt"
	"math"

	"tau2rl/gpu"
)

// Backend is the pure-Go fp32 gpu.Backend. It holds fp32 parameters (which are the master
// weights), their gradients, the AdamW moments and the activations of the last Forward.
type Backend struct {
	m      *model[float32]
	last   *acts[float32] // activations of the last Forward, consumed by Backward
	m1, m2 []float32      // AdamW first and second moments, in gpu.ParamSpecs order
	step   int            // AdamW steps taken (bias correction)
	closed bool
	// shard is set once the backend is a data-parallel rank (shard.go): m1, m2 then cover only
	// the shard, and gshard receives its reduce-scattered gradient.
	shard  *gpu.Shard
	gshard []float32
}

var (
	_ gpu.Backend        = (*Backend)(nil)
	_ gpu.WeightExporter = (*Backend)(nil)
	_ gpu.IPCExporter    = (*Backend)(nil)
)

// New builds a backend holding a copy of w.
func New(w *gpu.Weights) (*Backend, error) {
	m, err := newModel[float32](w)
	if err != nil {
		return nil, err
	}
	return &Backend{m: m, m1: make([]float32, len(m.params)), m2: make([]float32, len(m.params))}, nil
}

// Load builds a backend from a Hugging Face checkpoint directory (config.json + safetensors).
func Load(dir string) (*Backend, error) {
	w, err := gpu.LoadWeights(dir)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	return New(w)
}

// NewRandom builds a backend with gpu.NewRandomWeights(cfg, seed), the same initialization the
// CUDA backend uses for the same seed.
func NewRandom(cfg gpu.Config, seed uint64) (*Backend, error) {
	w, err := gpu.NewRandomWeights(cfg, seed)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	return New(w)
}

var errClosed = errors.New("cpu: backend is closed")

// Config returns the model configuration.
func (b *Backend) Config() gpu.Config { return b.m.cfg }

func (b *Backend) check(mb *gpu.MicroBatch) error {
	if b.closed {
		return errClosed
	}
	if mb == nil {
		return fmt.Errorf("cpu: nil micro-batch")
	}
	if err := mb.Validate(b.m.cfg.VocabSize); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	return nil
}

// LogProbs runs the forward pass without keeping activations.
func (b *Backend) LogProbs(mb *gpu.MicroBatch) (logp, entropy []float32, err error) {
	if err := b.check(mb); err != nil {
		return nil, nil, err
	}
	a := b.m.forward(mb, false)
	if err := b.m.hookErr(); err != nil {
		return nil, nil, fmt.Errorf("cpu: %w", err)
	}
	return a.logp, a.entropy, nil
}

// Forward runs the forward pass keeping every activation for Backward.
func (b *Backend) Forward(mb *gpu.MicroBatch) (logp, entropy []float32, err error) {
	b.last = nil
	if err := b.check(mb); err != nil {
		return nil, nil, err
	}
	a := b.m.forward(mb, true)
	if err := b.m.hookErr(); err != nil {
		return nil, nil, fmt.Errorf("cpu: %w", err)
	}
	b.last = a
	return append([]float32(nil), a.logp...), append([]float32(nil), a.entropy...), nil
}

// Backward accumulates the gradient of Σ dlogp·logp for the last Forward's micro-batch. Each
// Forward supports one Backward, so a micro-batch is never counted twice by mistake.
func (b *Backend) Backward(dlogp []float32) error {
	if b.closed {
		return errClosed
	}
	if b.last == nil {
		return fmt.Errorf("cpu: Backward without a preceding Forward (or called twice)")
	}
	if len(dlogp) != b.last.n {
		return fmt.Errorf("cpu: Backward got %d dlogp values for a micro-batch of %d nodes", len(dlogp), b.last.n)
	}
	for i, v := range dlogp {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("cpu: dlogp[%d] = %v is not finite", i, v)
		}
	}
	b.m.backward(b.last, dlogp)
	b.last = nil
	if err := b.m.hookErr(); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	return nil
}

// Step clips the global gradient norm, applies AdamW, zeroes the gradients, and returns the
// pre-clip norm. A non-finite norm leaves the weights untouched, zeroes the gradients, and is
// returned as an error (with the norm), so one bad micro-batch cannot poison the model.
func (b *Backend) Step(opt gpu.Optimizer) (float64, error) {
	if b.closed {
		return 0, errClosed
	}
	if err := opt.Validate(); err != nil {
		return 0, fmt.Errorf("cpu: %w", err)
	}
	if b.shard != nil {
		return 0, errSharded
	}
	b.last = nil
	norm := globalNorm(b.m.grads)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		clear(b.m.grads)
		return norm, fmt.Errorf("cpu: gradient norm %v is not finite; step skipped", norm)
	}
	b.step++
	adamwUpdate(b.m.params, b.m.grads, b.m1, b.m2, clipScale(norm, opt.MaxGradNorm), b.step,
		opt.LR, opt.Beta1, opt.Beta2, opt.Eps, opt.WeightDecay)
	clear(b.m.grads)
	return norm, nil
}

// Save writes a Hugging Face checkpoint (config.json + safetensors in dtype) into dir.
func (b *Backend) Save(dir string, dtype gpu.DType) error {
	if b.closed {
		return errClosed
	}
	return gpu.SaveCheckpoint(dir, b.m.cfg, dtype, func(name string) ([]float32, error) {
		t, ok := b.m.p.byName[name]
		if !ok {
			return nil, fmt.Errorf("no tensor %s", name)
		}
		return t, nil
	})
}

// Weights returns a copy of the current fp32 parameters.
func (b *Backend) Weights() (*gpu.Weights, error) {
	if b.closed {
		return nil, errClosed
	}
	return b.m.weights(), nil
}

// Gradients returns a copy of the accumulated gradients by tensor name (tests and debugging).
func (b *Backend) Gradients() map[string][]float32 {
	out := map[string][]float32{}
	for name, g := range b.m.g.byName {
		out[name] = append([]float32(nil), g...)
	}
	return out
}

// Close releases the buffers; the backend is unusable afterwards.
func (b *Backend) Close() error {
	b.closed = true
	b.last = nil
	b.m1, b.m2 = nil, nil
	return nil
}

// ExportWeights implements gpu.IPCExporter: the pure-Go backend's weights live in host memory, so
// there is nothing a sampler could map by CUDA IPC. The trainer's reload.mode=auto then reloads
// its servers from disk; reload.mode=ipc is refused at start-up with this error.
func (b *Backend) ExportWeights() (gpu.IPCExport, error) {
	return gpu.IPCExport{}, fmt.Errorf("cpu: %w", gpu.ErrIPCUnsupported)
}
