//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"bytes"
	"fmt"
	"unsafe"

	"tau2rl/gpu"
)

// Weights to a sampler on the same GPU by CUDA IPC (gpu.IPCExporter, gpu.IPCWeightLoader; issue
// 29). The exported buffer is the backend's bf16 working copy of the weights (Backend.param):
// AdamW refreshes it from the fp32 masters after every step with the same round-to-nearest-even
// as a bfloat16 checkpoint, and it already is in the Decoder's layout (paramLayout, Hugging Face
// names and [out, in] shapes), so exporting costs no memory and no copy on the trainer's side and
// the sampler's update is one device-to-device copy.

var (
	_ gpu.IPCExporter     = (*Backend)(nil)
	_ gpu.IPCWeightLoader = (*Decoder)(nil)
)

// deviceUUID is device dev's UUID as nvidia-smi prints it (GPU-8-4-4-4-12 hex digits).
func deviceUUID(dev int) (string, error) {
	var u [16]C.uchar
	if err := statusErr(C.t2_device_uuid(C.int(dev), &u[0])); err != nil {
		return "", fmt.Errorf("cuda: device %d uuid: %w", dev, err)
	}
	b := make([]byte, 16)
	for i := range u {
		b[i] = byte(u[i])
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// ipcTensors lists the tensors of a bf16 buffer in layout pl.
func ipcTensors(specs []gpu.ParamSpec, offs map[string]int) []gpu.IPCTensor {
	ts := make([]gpu.IPCTensor, 0, len(specs))
	for _, s := range specs {
		ts = append(ts, gpu.IPCTensor{Name: s.Name, DType: gpu.BF16, Shape: append([]int(nil), s.Shape...), Offset: 2 * int64(offs[s.Name])})
	}
	return ts
}

// ExportWeights implements gpu.IPCExporter. The handle is made once (it stays valid while the
// backend lives); every call synchronizes the device, so the buffer holds the last step's
// weights when it returns. A data-parallel rank refuses (its group reloads from disk).
func (b *Backend) ExportWeights() (gpu.IPCExport, error) {
	if err := b.enter(); err != nil {
		return gpu.IPCExport{}, err
	}
	defer b.leave()
	if b.shard != nil {
		return gpu.IPCExport{}, fmt.Errorf("cuda: a data-parallel rank: %w", gpu.ErrIPCUnsupported)
	}
	if b.ipc == nil {
		var h [gpu.IPCHandleBytes]byte
		if err := statusErr(C.t2_ipc_get_handle(b.param, (*C.uchar)(unsafe.Pointer(&h[0])))); err != nil {
			return gpu.IPCExport{}, fmt.Errorf("cuda: export weights: %w", err)
		}
		uuid, err := deviceUUID(b.opt.Device)
		if err != nil {
			return gpu.IPCExport{}, err
		}
		b.ipc = &gpu.IPCExport{Handle: h, Device: uuid, Tensors: ipcTensors(b.specs, b.offs), TotalBytes: 2 * int64(b.total)}
	}
	if err := syncDevice(); err != nil {
		return gpu.IPCExport{}, fmt.Errorf("cuda: export weights: %w", err)
	}
	e := *b.ipc
	e.Tensors = append([]gpu.IPCTensor(nil), e.Tensors...)
	return e, nil
}

// ipcMapping is another process's weight buffer mapped into the decoder's (t2_ipc_open), kept
// while the same handle comes back so later updates cost only the copy.
type ipcMapping struct {
	handle [gpu.IPCHandleBytes]byte
	ptr    dptr
}

func (m *ipcMapping) close() error {
	if m.ptr == nil {
		return nil
	}
	err := statusErr(C.t2_ipc_close(m.ptr))
	m.ptr = nil
	if err != nil {
		return fmt.Errorf("cuda: close ipc weights: %w", err)
	}
	return nil
}

// DeviceUUID implements gpu.IPCWeightLoader.
func (d *Decoder) DeviceUUID() (string, error) { return deviceUUID(d.dev) }

// LoadWeightsIPC implements gpu.IPCWeightLoader: e is checked against the served model (names,
// shapes, bf16, layout, the GPU) before anything is copied, so a mismatch leaves the old weights
// serving. The mapping of e's handle is cached; a different handle unmaps the previous one.
func (d *Decoder) LoadWeightsIPC(e gpu.IPCExport) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	if err := e.CheckIPCTensors(d.cfg, gpu.BF16); err != nil {
		return fmt.Errorf("cuda: decoder: %w", err)
	}
	uuid, err := deviceUUID(d.dev)
	if err != nil {
		return err
	}
	if e.Device != uuid {
		return fmt.Errorf("cuda: decoder: the weights are on GPU %s, this decoder runs on %s: CUDA IPC works on one GPU only (reload.mode=disk)", e.Device, uuid)
	}
	if d.ipc.ptr == nil || !bytes.Equal(d.ipc.handle[:], e.Handle[:]) {
		if err := d.ipc.close(); err != nil {
			return err
		}
		var p dptr
		if err := statusErr(C.t2_ipc_open((*C.uchar)(unsafe.Pointer(&e.Handle[0])), &p)); err != nil {
			return fmt.Errorf("cuda: decoder: open the trainer's ipc handle (it must come from another live process on this GPU): %w", err)
		}
		d.ipc = ipcMapping{handle: e.Handle, ptr: p}
	}
	if err := syncDevice(); err != nil { // the last step's kernels still read the weights
		return fmt.Errorf("cuda: decoder: load weights: %w", err)
	}
	// The trainer's export is in the decoder's own layout: one copy. Anything else (another
	// exporter's order or padding) goes tensor by tensor.
	same := e.TotalBytes == 2*int64(d.pl.total)
	for _, t := range e.Tensors {
		same = same && t.Offset == 2*int64(d.pl.offs[t.Name])
	}
	if same {
		if err := statusErr(C.t2_d2d(d.param, d.ipc.ptr, C.size_t(e.TotalBytes))); err != nil {
			return fmt.Errorf("cuda: decoder: copy ipc weights: %w", err)
		}
	} else {
		for _, t := range e.Tensors {
			if err := statusErr(C.t2_d2d(off(d.param, d.pl.offs[t.Name], 2), unsafe.Add(d.ipc.ptr, t.Offset), C.size_t(t.Bytes()))); err != nil {
				return fmt.Errorf("cuda: decoder: copy ipc tensor %s: %w", t.Name, err)
			}
		}
	}
	// t2_d2d is asynchronous: wait for the copy, because once the update is answered the trainer
	// goes on to its next optimizer step, which rewrites the buffer read here (another process:
	// nothing else orders the two).
	if err := syncDevice(); err != nil {
		return fmt.Errorf("cuda: decoder: copy ipc weights: %w", err)
	}
	return nil
}

// params downloads the decoder's bf16 weight buffer (tests compare it with a checkpoint's).
func (d *Decoder) params() ([]uint16, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	out := make([]uint16, d.pl.total)
	if err := statusErr(C.t2_d2h(unsafe.Pointer(&out[0]), d.param, C.size_t(2*len(out)))); err != nil {
		return nil, fmt.Errorf("cuda: decoder: download weights: %w", err)
	}
	return out, nil
}
