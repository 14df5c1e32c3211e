package cpu

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"tau2rl/gpu"
	"tau2rl/gpu/safetensors"
)

// This file persists the AdamW state (moments, step count, fp32 master weights) in the format
// gpu.OptimizerStateSaver documents, so a trainer resumed from a checkpoint continues bit for bit.

var _ gpu.OptimizerStateSaver = (*Backend)(nil)

// SaveOptimizerState writes gpu.OptimizerStateFile into dir (created if needed) through a synced
// temporary file and a rename, so dir never holds a partial file under the final name.
func (b *Backend) SaveOptimizerState(dir string) error {
	if b.closed {
		return errClosed
	}
	if b.shard != nil {
		return errSharded
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cpu: save optimizer state: %w", err)
	}
	cfg := b.m.cfg
	src := map[string]paramViews[float32]{
		gpu.SuffixMaster: b.m.p, gpu.SuffixExpAvg: views(cfg, b.m1), gpu.SuffixExpAvgSq: views(cfg, b.m2),
	}
	path := filepath.Join(dir, gpu.OptimizerStateFile)
	err := gpu.WriteOptimizerState(path, cfg, b.step, func(p gpu.ParamSpec, suffix string) ([]float32, error) {
		return src[suffix].byName[p.Name], nil
	})
	if err != nil {
		return fmt.Errorf("cpu: save optimizer state %s: %w", path, err)
	}
	return nil
}

// LoadOptimizerState replaces the moments, step count and master weights with those of dir's
// gpu.OptimizerStateFile. The whole file is checked before anything is replaced, so an error
// leaves the backend as it was. Pending gradients and the last Forward are discarded, as after
// Step.
func (b *Backend) LoadOptimizerState(dir string) error {
	if b.closed {
		return errClosed
	}
	if b.shard != nil {
		return errSharded
	}
	path := filepath.Join(dir, gpu.OptimizerStateFile)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cpu: load optimizer state: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cpu: load optimizer state: %w", err)
	}
	st, err := readOptState(b.m.cfg, f, fi.Size())
	if err != nil {
		return fmt.Errorf("cpu: load optimizer state %s: %w", path, err)
	}
	copy(b.m.params, st.params)
	b.m1, b.m2, b.step = st.m1, st.m2, st.step
	clear(b.m.grads)
	b.last = nil
	return nil
}

// optState is a decoded optimizer-state file: flat buffers in gpu.ParamSpecs order.
type optState struct {
	params, m1, m2 []float32
	step           int
}

// readOptState decodes and checks an optimizer-state image of the given size for cfg.
func readOptState(cfg gpu.Config, r io.ReaderAt, size int64) (*optState, error) {
	f, err := safetensors.NewFile(r, size)
	if err != nil {
		return nil, err
	}
	step, err := gpu.CheckOptimizerStateHeader(cfg, f)
	if err != nil {
		return nil, err
	}
	_, n := layout(cfg)
	st := &optState{params: make([]float32, n), m1: make([]float32, n), m2: make([]float32, n), step: step}
	dst := map[string]paramViews[float32]{
		gpu.SuffixMaster: views(cfg, st.params), gpu.SuffixExpAvg: views(cfg, st.m1), gpu.SuffixExpAvgSq: views(cfg, st.m2),
	}
	for _, p := range gpu.ParamSpecs(cfg) {
		for _, suf := range gpu.OptimizerStateSuffixes {
			vals, err := gpu.ReadOptimizerStateTensor(f, p, suf, step)
			if err != nil {
				return nil, err
			}
			copy(dst[suf].byName[p.Name], vals)
		}
	}
	return st, nil
}
