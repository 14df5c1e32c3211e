//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"tau2rl/gpu"
)

// The weight-sync group on GPUs (gpu/weightsync, backend nccl; issue 29): the trainer's rank 0
// broadcasts each tensor of its bf16 working weights (the buffer its CUDA IPC export shares, in
// place) and a tau2-sampler on another GPU receives them by NCCL into a device staging buffer,
// then copies them device to device into its weights between two steps, as LoadWeightsIPC does
// from a mapped buffer. Built and vetted against stand-in libraries only: no machine with several
// GPUs has run it yet (docs/PERFORMANCE.md, issue 29).

// WeightBuffer implements weightsync.DeviceWeights: the bf16 working weights after the last
// step's kernels (the device is synchronized), their tensors and the device ordinal. A
// data-parallel rank refuses (its group broadcasts by the host hub).
func (b *Backend) WeightBuffer() (unsafe.Pointer, []gpu.IPCTensor, int, error) {
	if err := b.enter(); err != nil {
		return nil, nil, 0, err
	}
	defer b.leave()
	if b.shard != nil {
		return nil, nil, 0, fmt.Errorf("cuda: a data-parallel rank holds a shard of the weights, not a broadcastable buffer (reload.sync.backend=tcp)")
	}
	if err := syncDevice(); err != nil {
		return nil, nil, 0, fmt.Errorf("cuda: weight buffer: %w", err)
	}
	return b.param, ipcTensors(b.specs, b.offs), b.opt.Device, nil
}

// deviceStage is a decoder's staging buffer for weight-sync updates.
type deviceStage struct {
	ptr   dptr
	bytes int64
}

func (s *deviceStage) free() error {
	if s.ptr == nil {
		return nil
	}
	err := free(s.ptr)
	s.ptr, s.bytes = nil, 0
	return err
}

// DeviceOrdinal implements weightsync.DeviceStager.
func (d *Decoder) DeviceOrdinal() int { return d.dev }

// StagingBuffer implements weightsync.DeviceStager: a buffer of at least bytes on the decoder's
// device, grown when an update needs more (the model's bf16 size: 3.4 GB at Qwen3-1.7B, beside
// the weights and the KV cache).
func (d *Decoder) StagingBuffer(bytes int64) (unsafe.Pointer, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.leave()
	if d.stage.ptr != nil && d.stage.bytes >= bytes {
		return d.stage.ptr, nil
	}
	if err := d.stage.free(); err != nil {
		return nil, fmt.Errorf("cuda: decoder: free the staging buffer: %w", err)
	}
	p, err := malloc(int(bytes))
	if err != nil {
		return nil, fmt.Errorf("cuda: decoder: staging buffer for a weight-sync update: %w", err)
	}
	d.stage = deviceStage{ptr: p, bytes: bytes}
	return p, nil
}

// LoadWeightsStaged implements weightsync.DeviceStager: ts (packed bf16 at their offsets in the
// staging buffer) are checked against the served model before anything is copied, so a mismatch
// leaves the old weights serving; then one device-to-device copy per tensor into the decoder's
// layout, waited for (the next update rewrites the staging buffer).
func (d *Decoder) LoadWeightsStaged(ts []gpu.IPCTensor, total int64) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	if err := (gpu.IPCExport{Tensors: ts, TotalBytes: total}).CheckIPCTensors(d.cfg, gpu.BF16); err != nil {
		return fmt.Errorf("cuda: decoder: %w", err)
	}
	if d.stage.ptr == nil || d.stage.bytes < total {
		return fmt.Errorf("cuda: decoder: the staging buffer holds %d bytes, the update %d", d.stage.bytes, total)
	}
	if err := syncDevice(); err != nil { // the last step's kernels still read the weights
		return fmt.Errorf("cuda: decoder: load staged weights: %w", err)
	}
	for _, t := range ts {
		if err := statusErr(C.t2_d2d(off(d.param, d.pl.offs[t.Name], 2), unsafe.Add(d.stage.ptr, t.Offset), C.size_t(t.Bytes()))); err != nil {
			return fmt.Errorf("cuda: decoder: copy staged tensor %s: %w", t.Name, err)
		}
	}
	if err := syncDevice(); err != nil {
		return fmt.Errorf("cuda: decoder: copy staged weights: %w", err)
	}
	return nil
}
