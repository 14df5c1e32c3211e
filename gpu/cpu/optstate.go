package cpu

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"tau2rl/gpu"
	"tau2rl/gpu/safetensors"
)

// This file persists the AdamW state (moments, step count, fp32 master weights) in the format
// gpu.OptimizerStateSaver documents, so a trainer resumed from a checkpoint continues bit for bit.

var _ gpu.OptimizerStateSaver = (*Backend)(nil)

// optStateSpecs lists the tensors of the optimizer-state file in write order: per parameter (in
// gpu.ParamSpecs order) its master weights, exp_avg and exp_avg_sq.
func optStateSpecs(cfg gpu.Config) []safetensors.TensorSpec {
	var ts []safetensors.TensorSpec
	for _, s := range gpu.ParamSpecs(cfg) {
		for _, suf := range []string{gpu.SuffixMaster, gpu.SuffixExpAvg, gpu.SuffixExpAvgSq} {
			ts = append(ts, safetensors.TensorSpec{Name: s.Name + suf, DType: safetensors.F32, Shape: s.Shape})
		}
	}
	return ts
}

// SaveOptimizerState writes gpu.OptimizerStateFile into dir (created if needed) through a synced
// temporary file and a rename, so dir never holds a partial file under the final name.
func (b *Backend) SaveOptimizerState(dir string) error {
	if b.closed {
		return errClosed
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cpu: save optimizer state: %w", err)
	}
	cfg := b.m.cfg
	m1, m2 := views(cfg, b.m1), views(cfg, b.m2)
	src := map[string][]float32{}
	for _, s := range gpu.ParamSpecs(cfg) {
		src[s.Name+gpu.SuffixMaster] = b.m.p.byName[s.Name]
		src[s.Name+gpu.SuffixExpAvg] = m1.byName[s.Name]
		src[s.Name+gpu.SuffixExpAvgSq] = m2.byName[s.Name]
	}
	meta := map[string]string{
		"format":         gpu.OptimizerStateFormat,
		"format_version": gpu.OptimizerStateFormatVersion,
		"optimizer":      "adamw",
		"step":           strconv.Itoa(b.step),
	}
	path := filepath.Join(dir, gpu.OptimizerStateFile)
	err := writeFileAtomic(path, func(w io.Writer) error {
		sw, err := safetensors.NewWriter(w, optStateSpecs(cfg), meta)
		if err != nil {
			return err
		}
		for _, ts := range optStateSpecs(cfg) {
			if err := sw.WriteFloat32(ts.Name, src[ts.Name]); err != nil {
				return err
			}
		}
		return sw.Close()
	})
	if err != nil {
		return fmt.Errorf("cpu: save optimizer state %s: %w", path, err)
	}
	return nil
}

// writeFileAtomic streams fill's output into a temporary file next to path, fsyncs it, renames
// it to path and fsyncs the directory.
func writeFileAtomic(path string, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := fill(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
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
	md := f.Header.Metadata
	if md["format"] != gpu.OptimizerStateFormat {
		return nil, fmt.Errorf("metadata format %q, want %q", md["format"], gpu.OptimizerStateFormat)
	}
	if md["format_version"] != gpu.OptimizerStateFormatVersion {
		return nil, fmt.Errorf("format_version %q, this backend reads %q", md["format_version"], gpu.OptimizerStateFormatVersion)
	}
	if md["optimizer"] != "adamw" {
		return nil, fmt.Errorf("optimizer %q, want adamw", md["optimizer"])
	}
	step, err := strconv.Atoi(md["step"])
	if err != nil || step < 0 || strconv.Itoa(step) != md["step"] {
		return nil, fmt.Errorf("step %q is not a non-negative integer", md["step"])
	}
	specs := optStateSpecs(cfg)
	want := make(map[string]safetensors.TensorSpec, len(specs))
	for _, s := range specs {
		want[s.Name] = s
	}
	for _, t := range f.Header.Tensors {
		if _, ok := want[t.Name]; !ok {
			return nil, fmt.Errorf("unexpected tensor %q: the file is for a different model config", t.Name)
		}
	}
	_, n := layout(cfg)
	st := &optState{params: make([]float32, n), m1: make([]float32, n), m2: make([]float32, n), step: step}
	dst := map[string]paramViews[float32]{
		gpu.SuffixMaster: views(cfg, st.params), gpu.SuffixExpAvg: views(cfg, st.m1), gpu.SuffixExpAvgSq: views(cfg, st.m2),
	}
	for _, p := range gpu.ParamSpecs(cfg) {
		for suf, v := range dst {
			name := p.Name + suf
			info, ok := f.Header.Lookup(name)
			if !ok {
				return nil, fmt.Errorf("missing tensor %q: the file is for a different model config", name)
			}
			if info.DType != safetensors.F32 {
				return nil, fmt.Errorf("tensor %q is %s, want F32 (optimizer state is never rounded)", name, info.DType)
			}
			if !slices.Equal(info.Shape, p.Shape) {
				return nil, fmt.Errorf("tensor %q has shape %v, this model's %s is %v", name, info.Shape, p.Name, p.Shape)
			}
			vals, _, err := f.Float32(name)
			if err != nil {
				return nil, err
			}
			for i, x := range vals {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					return nil, fmt.Errorf("tensor %q[%d] = %v is not finite", name, i, x)
				}
				if suf == gpu.SuffixExpAvgSq && x < 0 {
					return nil, fmt.Errorf("tensor %q[%d] = %v: a second moment cannot be negative", name, i, x)
				}
				if step == 0 && suf != gpu.SuffixMaster && x != 0 {
					return nil, fmt.Errorf("tensor %q[%d] = %v at step 0: moments must be zero before the first step", name, i, x)
				}
			}
			copy(v.byName[p.Name], vals)
		}
	}
	return st, nil
}
