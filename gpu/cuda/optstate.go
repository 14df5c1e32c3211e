//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"tau2rl/gpu"
	"tau2rl/gpu/safetensors"
)

// This file persists the AdamW state (fp32 master weights, moments, step count) in the format
// gpu.OptimizerStateSaver documents, the same file gpu/cpu writes and reads, so a CUDA trainer
// restarted from a checkpoint continues the optimization it would have run without the restart
// (and a state saved by one backend loads into the other).

var _ gpu.OptimizerStateSaver = (*Backend)(nil)

// optBuffer is the flat device buffer holding the optimizer-state tensors with the given suffix
// (one of gpu.OptimizerStateSuffixes).
func (b *Backend) optBuffer(suffix string) dptr {
	switch suffix {
	case gpu.SuffixMaster:
		return b.master
	case gpu.SuffixExpAvg:
		return b.m
	default:
		return b.v
	}
}

// SaveOptimizerState writes gpu.OptimizerStateFile into dir (created if needed), one tensor at a
// time from the device (host memory stays one tensor), through a synced temporary file, a rename
// and a directory sync, so dir never holds a partial file under the final name.
func (b *Backend) SaveOptimizerState(dir string) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if b.stateErr != nil {
		return fmt.Errorf("cuda: save optimizer state: %w", b.stateErr)
	}
	if b.shard != nil {
		return errSharded
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cuda: save optimizer state: %w", err)
	}
	path := filepath.Join(dir, gpu.OptimizerStateFile)
	var scratch []float32 // see tensorInto
	err := gpu.WriteOptimizerState(path, b.cfg, b.step, func(p gpu.ParamSpec, suffix string) ([]float32, error) {
		return b.tensorInto(b.optBuffer(suffix), p, &scratch)
	})
	if err != nil {
		return fmt.Errorf("cuda: save optimizer state %s: %w", path, err)
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
	defer b.leave()
	if b.shard != nil {
		return errSharded
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
	step, err := gpu.CheckOptimizerStateHeader(b.cfg, f)
	if err != nil {
		return 0, err
	}
	for _, p := range b.specs {
		for _, suf := range gpu.OptimizerStateSuffixes {
			if _, err := gpu.ReadOptimizerStateTensor(f, p, suf, step); err != nil {
				return 0, err
			}
		}
	}
	return step, nil
}

// uploadOptState copies the checked file to the device buffers, refreshes the bf16 weights, zeroes
// the gradients and sets the step count.
func (b *Backend) uploadOptState(f *safetensors.File, step int) error {
	for _, p := range b.specs {
		for _, suf := range gpu.OptimizerStateSuffixes {
			vals, err := gpu.ReadOptimizerStateTensor(f, p, suf, step)
			if err != nil {
				return err
			}
			if err := h2dF32(off(b.optBuffer(suf), b.offs[p.Name], 4), vals); err != nil {
				return fmt.Errorf("upload %s%s: %w", p.Name, suf, err)
			}
		}
	}
	var errs []error
	if err := statusErr(C.t2_f32_to_bf16(b.param, f32p(b.master), csz(b.total))); err != nil {
		errs = append(errs, fmt.Errorf("bf16 copy of the weights: %w", err))
	}
	b.gradsStale = true // the loaded step starts with no gradient, as after a Step
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
