package weightsync

import (
	"fmt"
	"unsafe"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/safetensors"
)

// DeviceStager is implemented by decoders that receive a broadcast into device memory and copy it
// into their weights device to device (gpu/cuda's Decoder, backend nccl).
type DeviceStager interface {
	// DeviceOrdinal is the CUDA device the decoder runs on (the rank's NCCL device).
	DeviceOrdinal() int
	// StagingBuffer returns a device buffer of at least bytes bytes, kept for later updates.
	StagingBuffer(bytes int64) (unsafe.Pointer, error)
	// LoadWeightsStaged copies the tensors ts (bf16, at their offsets in the staging buffer) into
	// the decoder's weights. Called between two steps; ts must be exactly the model's
	// (gpu.IPCExport.CheckIPCTensors), checked before anything is copied.
	LoadWeightsStaged(ts []gpu.IPCTensor, total int64) error
}

// Check reports whether ts (packed, total bytes) are exactly cfg's parameters in bf16, which a
// receiver checks before it takes part in a broadcast or touches its weights.
func Check(cfg gpu.Config, ts []gpu.IPCTensor, total int64) error {
	return gpu.IPCExport{Tensors: ts, TotalBytes: total}.CheckIPCTensors(cfg, gpu.BF16)
}

// HostStaging is a receiver's host staging buffer, reused across updates.
type HostStaging struct{ b []byte }

// Buffer returns the staging buffer for total bytes.
func (s *HostStaging) Buffer(total int64) collective.Buffer {
	if int64(cap(s.b)) < total {
		s.b = make([]byte, total)
	}
	s.b = s.b[:total]
	return collective.HostBytes(s.b, collective.BF16)
}

// Weights converts the staged bf16 tensors ts into fp32 weights of cfg (what a decoder's
// LoadWeights takes: the pure-Go decoder's own format), checked (gpu.Weights.Check: every
// tensor, finite values).
func (s *HostStaging) Weights(cfg gpu.Config, ts []gpu.IPCTensor) (*gpu.Weights, error) {
	w := &gpu.Weights{Config: cfg, Tensors: make(map[string][]float32, len(ts))}
	for _, t := range ts {
		n := t.Bytes() / 2
		if t.Offset+2*n > int64(len(s.b)) {
			return nil, fmt.Errorf("weightsync: tensor %s past the staging buffer", t.Name)
		}
		src := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(s.b[t.Offset:]))), n)
		x := make([]float32, n)
		safetensors.Float32sFromBF16(x, src)
		w.Tensors[t.Name] = x
	}
	if err := w.Check(); err != nil {
		return nil, fmt.Errorf("weightsync: received weights: %w", err)
	}
	return w, nil
}
