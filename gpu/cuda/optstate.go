//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"tau2rl/gpu"
	"tau2rl/gpu/safetensors"
)

// This file persists the AdamW state (fp32 master weights, moments, step count) in the format
// gpu.OptimizerStateSaver documents, the same file gpu/cpu writes and reads, so a CUDA trainer
// restarted from a checkpoint continues the optimization it would have run without the restart
// (and a state saved by one backend loads into the other).

var _ gpu.OptimizerStateSaver = (*Backend)(nil)

// optBuffers are the three tensors kept per parameter, in file order, with the flat device buffer
// each comes from.
func (b *Backend) optBuffers() []struct {
	suffix string
	buf    dptr
} {
	return []struct {
		suffix string
		buf    dptr
	}{{gpu.SuffixMaster, b.master}, {gpu.SuffixExpAvg, b.m}, {gpu.SuffixExpAvgSq, b.v}}
}

// optStateSpecs lists the tensors of the optimizer-state file in write order: per parameter (in
// gpu.ParamSpecs order) its master weights, exp_avg and exp_avg_sq, all F32 of the parameter's shape.
func (b *Backend) optStateSpecs() []safetensors.TensorSpec {
	var ts []safetensors.TensorSpec
	for _, s := range b.specs {
		for _, o := range b.optBuffers() {
			ts = append(ts, safetensors.TensorSpec{Name: s.Name + o.suffix, DType: safetensors.F32, Shape: s.Shape})
		}
	}
	return ts
}

// SaveOptimizerState writes gpu.OptimizerStateFile into dir (created if needed), one tensor at a
// time from the device (host memory stays one tensor), through a synced temporary file, a rename
// and a directory sync, so dir never holds a partial file under the final name.
func (b *Backend) SaveOptimizerState(dir string) error {
	if err := b.enter(); err != nil {
		return err
	}
	if b.stateErr != nil {
		return fmt.Errorf("cuda: save optimizer state: %w", b.stateErr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cuda: save optimizer state: %w", err)
	}
	meta := map[string]string{
		"format":         gpu.OptimizerStateFormat,
		"format_version": gpu.OptimizerStateFormatVersion,
		"optimizer":      "adamw",
		"step":           strconv.Itoa(b.step),
	}
	path := filepath.Join(dir, gpu.OptimizerStateFile)
	if err := b.writeOptState(path, meta); err != nil {
		return fmt.Errorf("cuda: save optimizer state %s: %w", path, err)
	}
	return nil
}

func (b *Backend) writeOptState(path string, meta map[string]string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
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
	specs := b.optStateSpecs()
	sw, err := safetensors.NewWriter(bw, specs, meta)
	if err != nil {
		return err
	}
	for _, s := range b.specs {
		for _, o := range b.optBuffers() {
			vals, err := b.tensor(o.buf, s)
			if err != nil {
				return err
			}
			if err := sw.WriteFloat32(s.Name+o.suffix, vals); err != nil {
				return err
			}
		}
	}
	if err := sw.Close(); err != nil {
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
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", filepath.Dir(path), err)
	}
	return nil
}

// LoadOptimizerState replaces the master weights (and their bf16 copies), moments and step count
// with those of dir's gpu.OptimizerStateFile, written by this backend or by gpu/cpu for the same
// model config. The file is read twice, one tensor at a time, so host memory stays one tensor even
// for a 1.7B model's 24 GB of state: the first pass checks everything (metadata, names, dtypes,
// shapes, finite values, non-negative second moments, zero moments at step 0) and an error there
// leaves the backend unchanged; the second uploads. A read failure during the upload (the file
// changed or the disk failed between the passes) leaves the state half replaced: the backend then
// refuses Step and SaveOptimizerState until a LoadOptimizerState succeeds. Pending gradients and
// the last Forward are discarded, as after Step.
func (b *Backend) LoadOptimizerState(dir string) error {
	if err := b.enter(); err != nil {
		return err
	}
	path := filepath.Join(dir, gpu.OptimizerStateFile)
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("cuda: load optimizer state: %w", err)
	}
	defer f.Close()
	step, err := b.checkOptState(f)
	if err != nil {
		return fmt.Errorf("cuda: load optimizer state %s: %w", path, err)
	}
	if err := b.uploadOptState(f, step); err != nil {
		b.stateErr = fmt.Errorf("optimizer state half loaded from %s (%v); load it again", path, err)
		return fmt.Errorf("cuda: load optimizer state %s: %w", path, err)
	}
	b.stateErr = nil
	return nil
}

// checkOptState validates the whole file without touching the backend and returns its step.
func (b *Backend) checkOptState(f *safetensors.File) (int, error) {
	md := f.Header.Metadata
	if md["format"] != gpu.OptimizerStateFormat {
		return 0, fmt.Errorf("metadata format %q, want %q", md["format"], gpu.OptimizerStateFormat)
	}
	if md["format_version"] != gpu.OptimizerStateFormatVersion {
		return 0, fmt.Errorf("format_version %q, this backend reads %q", md["format_version"], gpu.OptimizerStateFormatVersion)
	}
	if md["optimizer"] != "adamw" {
		return 0, fmt.Errorf("optimizer %q, want adamw", md["optimizer"])
	}
	step, err := strconv.Atoi(md["step"])
	if err != nil || step < 0 || strconv.Itoa(step) != md["step"] {
		return 0, fmt.Errorf("step %q is not a non-negative integer", md["step"])
	}
	want := map[string]bool{}
	for _, s := range b.optStateSpecs() {
		want[s.Name] = true
	}
	for _, t := range f.Header.Tensors {
		if !want[t.Name] {
			return 0, fmt.Errorf("unexpected tensor %q: the file is for a different model config", t.Name)
		}
	}
	for _, p := range b.specs {
		for _, o := range b.optBuffers() {
			if _, err := readOptTensor(f, p, o.suffix, step); err != nil {
				return 0, err
			}
		}
	}
	return step, nil
}

// readOptTensor reads and checks one tensor of the file (the checks gpu.OptimizerStateSaver lists).
func readOptTensor(f *safetensors.File, p gpu.ParamSpec, suffix string, step int) ([]float32, error) {
	name := p.Name + suffix
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
		if suffix == gpu.SuffixExpAvgSq && x < 0 {
			return nil, fmt.Errorf("tensor %q[%d] = %v: a second moment cannot be negative", name, i, x)
		}
		if step == 0 && suffix != gpu.SuffixMaster && x != 0 {
			return nil, fmt.Errorf("tensor %q[%d] = %v at step 0: moments must be zero before the first step", name, i, x)
		}
	}
	return vals, nil
}

// uploadOptState copies the checked file to the device buffers, refreshes the bf16 weights, zeroes
// the gradients and sets the step count.
func (b *Backend) uploadOptState(f *safetensors.File, step int) error {
	for _, p := range b.specs {
		for _, o := range b.optBuffers() {
			vals, err := readOptTensor(f, p, o.suffix, step)
			if err != nil {
				return err
			}
			if err := h2dF32(off(o.buf, b.offs[p.Name], 4), vals); err != nil {
				return fmt.Errorf("upload %s%s: %w", p.Name, o.suffix, err)
			}
		}
	}
	var errs []error
	if err := statusErr(C.t2_f32_to_bf16(b.param, f32p(b.master), csz(b.total))); err != nil {
		errs = append(errs, fmt.Errorf("bf16 copy of the weights: %w", err))
	}
	if err := memset0(b.grad, 4*b.total); err != nil {
		errs = append(errs, fmt.Errorf("zero gradients: %w", err))
	}
	if err := syncDevice(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	b.step = step
	b.haveForward = false
	return nil
}
