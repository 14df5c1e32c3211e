package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
)

// tinyExport lists cfg's parameters as one packed bf16 buffer, as the CUDA backend exports them.
func tinyExport(cfg gpu.Config) gpu.IPCExport {
	var e gpu.IPCExport
	var o int64
	for _, s := range gpu.ParamSpecs(cfg) {
		t := gpu.IPCTensor{Name: s.Name, DType: gpu.BF16, Shape: append([]int(nil), s.Shape...), Offset: o}
		e.Tensors = append(e.Tensors, t)
		o += t.Bytes()
	}
	e.TotalBytes = o
	return e
}

func TestCheckIPCTensors(t *testing.T) {
	cfg := gpu.TinyConfig()
	for _, tc := range []struct {
		name string
		edit func(e *gpu.IPCExport)
		want string // "" = valid
	}{
		{"exact", func(*gpu.IPCExport) {}, ""},
		{"missing", func(e *gpu.IPCExport) { e.Tensors = e.Tensors[1:] }, "missing"},
		{"extra", func(e *gpu.IPCExport) {
			e.Tensors = append(e.Tensors, gpu.IPCTensor{Name: "model.extra", DType: gpu.BF16, Shape: []int{0}})
		}, "not a parameter"},
		{"duplicate", func(e *gpu.IPCExport) { e.Tensors = append(e.Tensors, e.Tensors[0]) }, "twice"},
		{"dtype", func(e *gpu.IPCExport) { e.Tensors[0].DType = gpu.F32 }, "the decoder takes bfloat16"},
		{"shape", func(e *gpu.IPCExport) { e.Tensors[0].Shape = []int{e.Tensors[0].Shape[1], e.Tensors[0].Shape[0]} }, "shape"},
		{"past the end", func(e *gpu.IPCExport) { e.TotalBytes-- }, "outside"},
		{"overlap", func(e *gpu.IPCExport) { e.Tensors[1].Offset = e.Tensors[0].Offset + 2 }, "overlap"},
		{"misaligned", func(e *gpu.IPCExport) {
			for i := range e.Tensors {
				e.Tensors[i].Offset++
			}
			e.TotalBytes++
		}, "multiple"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tinyExport(cfg)
			tc.edit(&e)
			err := e.CheckIPCTensors(cfg, gpu.BF16)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCPUBackendRefusesIPCExport: the pure-Go backend has no device memory to share, and says
// which reload mode works instead.
func TestCPUBackendRefusesIPCExport(t *testing.T) {
	b, err := cpu.NewRandom(gpu.TinyConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = gpu.ExportWeights(b)
	if !errors.Is(err, gpu.ErrIPCUnsupported) || !strings.Contains(err.Error(), "reload.mode=disk") {
		t.Fatalf("ExportWeights(cpu) = %v, want ErrIPCUnsupported naming reload.mode=disk", err)
	}
	if _, err := gpu.ExportWeights(struct{}{}); !errors.Is(err, gpu.ErrIPCUnsupported) {
		t.Fatalf("ExportWeights(non-exporter) = %v", err)
	}
}
