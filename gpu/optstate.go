package gpu

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"tau2rl/gpu/internal/par"
	"tau2rl/gpu/safetensors"
	"tau2rl/lib/durable"
)

// This file holds the optimizer-state file format (OptimizerStateSaver) in one place, so that every
// backend writes the same bytes and refuses the same bad files: a backend only says where its
// tensors live (host slices for gpu/cpu, device buffers for gpu/cuda).

// OptimizerStateSuffixes are the three tensors kept per parameter, in the order the file stores
// them: master weights, first moment, second moment.
var OptimizerStateSuffixes = [3]string{SuffixMaster, SuffixExpAvg, SuffixExpAvgSq}

// OptimizerStateSpecs lists the tensors of OptimizerStateFile for cfg in write order: per parameter
// (in ParamSpecs order) the OptimizerStateSuffixes, all F32 of the parameter's shape.
func OptimizerStateSpecs(cfg Config) []safetensors.TensorSpec {
	var ts []safetensors.TensorSpec
	for _, s := range ParamSpecs(cfg) {
		for _, suf := range OptimizerStateSuffixes {
			ts = append(ts, safetensors.TensorSpec{Name: s.Name + suf, DType: safetensors.F32, Shape: s.Shape})
		}
	}
	return ts
}

// optimizerStateMetadata is the file's __metadata__ after step AdamW steps.
func optimizerStateMetadata(step int) map[string]string {
	return map[string]string{
		"format":         OptimizerStateFormat,
		"format_version": OptimizerStateFormatVersion,
		"optimizer":      "adamw",
		"step":           strconv.Itoa(step),
	}
}

// WriteOptimizerState writes the optimizer-state file of a cfg model after step AdamW steps to
// path, asking tensor for each tensor in file order (one at a time, so a backend can copy it from
// the device and host memory stays one tensor; the writer is done with one tensor's values before
// it asks for the next, so tensor may return the same buffer every time). The bytes go to a
// temporary file next to path, which is fsynced, renamed to path, and the directory fsynced: path
// never holds a partial file.
func WriteOptimizerState(path string, cfg Config, step int, tensor func(p ParamSpec, suffix string) ([]float32, error)) error {
	if step < 0 {
		return fmt.Errorf("gpu: write optimizer state: negative step %d", step)
	}
	specs := OptimizerStateSpecs(cfg)
	return durable.Write(path, 0o644, func(w io.Writer) error {
		sw, err := safetensors.NewWriter(w, specs, optimizerStateMetadata(step))
		if err != nil {
			return err
		}
		for _, p := range ParamSpecs(cfg) {
			for _, suf := range OptimizerStateSuffixes {
				vals, err := tensor(p, suf)
				if err != nil {
					return fmt.Errorf("tensor %s%s: %w", p.Name, suf, err)
				}
				if err := sw.WriteFloat32(p.Name+suf, vals); err != nil {
					return err
				}
			}
		}
		return sw.Close()
	})
}

// CheckOptimizerStateHeader checks what the header of an optimizer-state file says (format,
// version, optimizer, step, and no tensor foreign to a cfg model) and returns the step count.
// It reads no tensor data: ReadOptimizerStateTensor checks each tensor as it is read, and also
// reports tensors the file lacks.
func CheckOptimizerStateHeader(cfg Config, f *safetensors.File) (step int, err error) {
	md := f.Header.Metadata
	if md["format"] != OptimizerStateFormat {
		return 0, fmt.Errorf("metadata format %q, want %q", md["format"], OptimizerStateFormat)
	}
	if md["format_version"] != OptimizerStateFormatVersion {
		return 0, fmt.Errorf("format_version %q, this backend reads %q", md["format_version"], OptimizerStateFormatVersion)
	}
	if md["optimizer"] != "adamw" {
		return 0, fmt.Errorf("optimizer %q, want adamw", md["optimizer"])
	}
	step, err = strconv.Atoi(md["step"])
	if err != nil || step < 0 || strconv.Itoa(step) != md["step"] {
		return 0, fmt.Errorf("step %q is not a non-negative integer", md["step"])
	}
	want := map[string]bool{}
	for _, s := range OptimizerStateSpecs(cfg) {
		want[s.Name] = true
	}
	for _, t := range f.Header.Tensors {
		if !want[t.Name] {
			return 0, fmt.Errorf("unexpected tensor %q: the file is for a different model config", t.Name)
		}
	}
	return step, nil
}

// ReadOptimizerStateTensor reads parameter p's tensor with the given suffix (one of
// OptimizerStateSuffixes) from a file whose header CheckOptimizerStateHeader accepted with this
// step, and checks it as OptimizerStateSaver requires: present, F32, p's shape, finite values,
// non-negative second moments, and zero moments at step 0.
func ReadOptimizerStateTensor(f *safetensors.File, p ParamSpec, suffix string, step int) ([]float32, error) {
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
	// The common case, a valid tensor, is established on all cores; a bad one is scanned again
	// in order below so the error names its first bad element.
	valid := !par.Any(len(vals), func(lo, hi int) bool {
		c := vals[lo:hi]
		if !allFinite(c) {
			return true
		}
		if suffix == SuffixExpAvgSq {
			for _, x := range c {
				if x < 0 {
					return true
				}
			}
		}
		if step == 0 && suffix != SuffixMaster {
			for _, x := range c {
				if x != 0 {
					return true
				}
			}
		}
		return false
	})
	if valid {
		return vals, nil
	}
	for i, x := range vals {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("tensor %q[%d] = %v is not finite", name, i, x)
		}
		if suffix == SuffixExpAvgSq && x < 0 {
			return nil, fmt.Errorf("tensor %q[%d] = %v: a second moment cannot be negative", name, i, x)
		}
		if step == 0 && suffix != SuffixMaster && x != 0 {
			return nil, fmt.Errorf("tensor %q[%d] = %v at step 0: moments must be zero before the first step", name, i, x)
		}
	}
	return vals, nil
}
