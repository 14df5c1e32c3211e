package gpu

import (
	"errors"
	"fmt"
	"slices"
)

// Weights shared between two processes on the same GPU by CUDA IPC (issue 29): the trainer's
// backend exports the device buffer that holds its bf16 weights (IPCExporter), a tau2-sampler on
// the same GPU maps it and copies every tensor device to device into its own weights
// (IPCWeightLoader). A reload then costs a D2D copy of ~3.4 GB at Qwen3-1.7B instead of a
// safetensors checkpoint written by the trainer and read back by the sampler. The HTTP request that
// carries an export is lib/inference/protocol's UpdateWeightsFromIPCRequest.

// IPCHandleBytes is the size of a cudaIpcMemHandle_t.
const IPCHandleBytes = 64

// IPCTensor is one tensor of an exported weight buffer: its Hugging Face name and shape (the
// same as in a safetensors checkpoint of the model), element type, and where it starts.
type IPCTensor struct {
	Name   string
	DType  DType
	Shape  []int
	Offset int64 // bytes from the start of the buffer
}

// Bytes is the tensor's size in bytes.
func (t IPCTensor) Bytes() int64 {
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// IPCExport describes a device buffer holding a model's weights that another process on the same
// GPU can map: the CUDA IPC handle of the allocation, the GPU's UUID (nvidia-smi's "GPU-…", the
// same whatever CUDA_VISIBLE_DEVICES renumbered), the tensors in it and its size. The handle stays
// valid while the exporting backend lives; the contents are the weights after the backend's last
// optimizer step, and they change at its next step, so a reader copies them before the exporter
// steps again (the trainer reloads its servers synchronously between steps).
type IPCExport struct {
	Handle     [IPCHandleBytes]byte
	Device     string
	Tensors    []IPCTensor
	TotalBytes int64
}

// IPCExporter is implemented by backends that can export their weights by CUDA IPC. Callers go
// through ExportWeights, which also answers for backends without it.
type IPCExporter interface {
	ExportWeights() (IPCExport, error)
}

// ErrIPCUnsupported is the error of a backend or decoder that cannot share weights by CUDA IPC
// (the pure-Go one, a data-parallel group): the trainer then reloads its servers from disk.
var ErrIPCUnsupported = errors.New("weights cannot be shared by CUDA IPC here (only a single-GPU cuda backend can); use reload.mode=disk")

// ExportWeights exports b's weights by CUDA IPC, or says why it cannot (ErrIPCUnsupported).
func ExportWeights(b any) (IPCExport, error) {
	x, ok := b.(IPCExporter)
	if !ok {
		return IPCExport{}, fmt.Errorf("gpu: %T: %w", b, ErrIPCUnsupported)
	}
	return x.ExportWeights()
}

// IPCWeightLoader is implemented by decoders that can replace their weights from another
// process's IPC export on the same GPU. Like Decoder.LoadWeights it is called from the engine's
// goroutine between two steps; on error the old weights keep serving.
type IPCWeightLoader interface {
	// DeviceUUID is the UUID of the GPU the decoder runs on (nvidia-smi's "GPU-…").
	DeviceUUID() (string, error)
	// LoadWeightsIPC copies every tensor of e into the decoder's weights. e must hold exactly
	// the model's tensors (CheckIPCTensors) on the decoder's GPU.
	LoadWeightsIPC(e IPCExport) error
}

// Size is the element size in bytes (0 for an unknown type).
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	case F32:
		return 4
	}
	return 0
}

// CheckIPCTensors reports whether e holds exactly cfg's parameters (ParamSpecs: the same names
// and shapes), each in want's element type, inside TotalBytes and without overlapping. A decoder
// checks an export with it before touching its own weights.
func (e IPCExport) CheckIPCTensors(cfg Config, want DType) error {
	specs := ParamSpecs(cfg)
	byName := make(map[string]IPCTensor, len(e.Tensors))
	for _, t := range e.Tensors {
		if _, dup := byName[t.Name]; dup {
			return fmt.Errorf("gpu: ipc weights: tensor %s listed twice", t.Name)
		}
		byName[t.Name] = t
	}
	for _, s := range specs {
		t, ok := byName[s.Name]
		if !ok {
			return fmt.Errorf("gpu: ipc weights: tensor %s missing", s.Name)
		}
		if t.DType != want {
			return fmt.Errorf("gpu: ipc weights: tensor %s is %s, the decoder takes %s", s.Name, t.DType, want)
		}
		if !slices.Equal(t.Shape, s.Shape) {
			return fmt.Errorf("gpu: ipc weights: tensor %s has shape %v, the served model's is %v", s.Name, t.Shape, s.Shape)
		}
		delete(byName, s.Name)
	}
	for name := range byName {
		return fmt.Errorf("gpu: ipc weights: tensor %s is not a parameter of the served model", name)
	}
	return CheckIPCLayout(e.Tensors, e.TotalBytes)
}

// CheckIPCLayout reports tensors of an unknown element type, a negative dimension or offset, or
// that run past total or overlap.
func CheckIPCLayout(ts []IPCTensor, total int64) error {
	type span struct {
		lo, hi int64
		name   string
	}
	spans := make([]span, 0, len(ts))
	for _, t := range ts {
		if t.DType.Size() == 0 {
			return fmt.Errorf("gpu: ipc weights: tensor %s: unknown dtype %q", t.Name, t.DType)
		}
		n := int64(t.DType.Size())
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("gpu: ipc weights: tensor %s: negative dimension in %v", t.Name, t.Shape)
			}
			if d > 0 && n > (1<<62)/int64(d) {
				return fmt.Errorf("gpu: ipc weights: tensor %s: shape %v is too large", t.Name, t.Shape)
			}
			n *= int64(d)
		}
		if t.Offset < 0 || t.Offset > total || n > total-t.Offset {
			return fmt.Errorf("gpu: ipc weights: tensor %s: bytes [%d, %d) outside the %d-byte buffer", t.Name, t.Offset, t.Offset+n, total)
		}
		if a := int64(t.DType.Size()); t.Offset%a != 0 {
			return fmt.Errorf("gpu: ipc weights: tensor %s: offset %d is not a multiple of its %d-byte elements", t.Name, t.Offset, a)
		}
		if n > 0 {
			spans = append(spans, span{t.Offset, t.Offset + n, t.Name})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return int(min(max(a.lo-b.lo, -1), 1)) })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return fmt.Errorf("gpu: ipc weights: tensors %s and %s overlap", spans[i-1].name, spans[i].name)
		}
	}
	return nil
}
