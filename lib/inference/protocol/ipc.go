package protocol

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
)

// tau2rl's own weight update by CUDA IPC (docs/INFERENCE.md, "tau2rl extension"): a trainer that
// holds its bf16 weights in one device buffer on the same GPU as a tau2-sampler sends the buffer's
// cudaIpcMemHandle_t and the tensors in it; the sampler maps the buffer and copies each tensor
// device to device into its own weights. SGLang has nothing wire-compatible
// (update_weights_from_tensor carries torch-serialized tensors), so only tau2-sampler serves it;
// other servers answer 404 and the trainer's reload.mode=auto reloads them from disk.

// IPCHandleBytes is the size of a cudaIpcMemHandle_t, decoded from UpdateWeightsFromIPCRequest's
// ipc_handle.
const IPCHandleBytes = 64

// IPC tensor element types: torch's dtype names without "torch." (as SGLang's
// update_weights_from_distributed spells them), and their sizes.
var ipcDTypeBytes = map[string]int64{"bfloat16": 2, "float16": 2, "float32": 4}

// IPCTensor is one tensor of the shared buffer: Hugging Face name and shape (row-major, as in a
// safetensors checkpoint), element type, and its first byte's offset in the buffer.
type IPCTensor struct {
	Name        string  `json:"name"`
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	OffsetBytes int64   `json:"offset_bytes"`
}

// UpdateWeightsFromIPCRequest is the body of POST /update_weights_from_ipc. The answer is
// UpdateWeightsResponse, as for SGLang's update endpoints.
type UpdateWeightsFromIPCRequest struct {
	// IPCHandle is the standard base64 of the 64-byte cudaIpcMemHandle_t of the buffer.
	IPCHandle string `json:"ipc_handle"`
	// Device is the UUID of the GPU holding the buffer (nvidia-smi's "GPU-…"); a server on
	// another GPU refuses the update.
	Device string `json:"device"`
	// Tensors lists every weight of the model in the buffer.
	Tensors []IPCTensor `json:"tensors"`
	// TotalBytes is the buffer's size; every tensor lies inside it.
	TotalBytes int64 `json:"total_bytes"`
	// WeightVersion is reported in meta_info.weight_version from the update on.
	WeightVersion *string `json:"weight_version,omitempty"`
	// FlushCache as SGLang's (default true; tau2-sampler always flushes: its cache entries were
	// computed with the old weights).
	FlushCache *bool `json:"flush_cache,omitempty"`
	// AbortAllRequests ends requests in flight (finish reason abort) instead of pausing them
	// for the swap and recomputing their KV under the new weights.
	AbortAllRequests bool `json:"abort_all_requests,omitempty"`
}

// NewUpdateWeightsFromIPC encodes handle into a request for tensors in a buffer of total bytes
// on GPU device.
func NewUpdateWeightsFromIPC(handle [IPCHandleBytes]byte, device string, tensors []IPCTensor, total int64) UpdateWeightsFromIPCRequest {
	return UpdateWeightsFromIPCRequest{IPCHandle: base64.StdEncoding.EncodeToString(handle[:]), Device: device,
		Tensors: tensors, TotalBytes: total}
}

// DecodeUpdateWeightsFromIPCRequest parses and validates a body (Validate), returning the request
// and its decoded handle.
func DecodeUpdateWeightsFromIPCRequest(body []byte) (UpdateWeightsFromIPCRequest, [IPCHandleBytes]byte, error) {
	var r UpdateWeightsFromIPCRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return r, [IPCHandleBytes]byte{}, fmt.Errorf("update_weights_from_ipc: %w", err)
	}
	h, err := r.Validate()
	return r, h, err
}

// TensorBytes is t's size in bytes, or an error for an unknown dtype, a negative dimension or a
// size that overflows.
func (t IPCTensor) TensorBytes() (int64, error) {
	n, ok := ipcDTypeBytes[t.DType]
	if !ok {
		return 0, fmt.Errorf("tensor %q: dtype %q is not one of bfloat16, float16, float32", t.Name, t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return 0, fmt.Errorf("tensor %q: negative dimension in shape %v", t.Name, t.Shape)
		}
		if d > 0 && n > (1<<62)/d {
			return 0, fmt.Errorf("tensor %q: shape %v is too large", t.Name, t.Shape)
		}
		n *= d
	}
	return n, nil
}

// Validate checks what a server can check without the buffer: a 64-byte handle, a device, at least
// one tensor, unique non-empty names, known dtypes, offsets aligned to the element size, every
// tensor inside total_bytes and no two overlapping. It returns the decoded handle.
func (r *UpdateWeightsFromIPCRequest) Validate() ([IPCHandleBytes]byte, error) {
	var h [IPCHandleBytes]byte
	raw, err := base64.StdEncoding.DecodeString(r.IPCHandle)
	if err != nil {
		return h, fmt.Errorf("update_weights_from_ipc: ipc_handle is not standard base64: %w", err)
	}
	if len(raw) != IPCHandleBytes {
		return h, fmt.Errorf("update_weights_from_ipc: ipc_handle holds %d bytes, a cudaIpcMemHandle_t has %d", len(raw), IPCHandleBytes)
	}
	copy(h[:], raw)
	if r.Device == "" {
		return h, fmt.Errorf("update_weights_from_ipc: device (the GPU's UUID) is required")
	}
	if len(r.Tensors) == 0 {
		return h, fmt.Errorf("update_weights_from_ipc: no tensors")
	}
	if r.TotalBytes <= 0 {
		return h, fmt.Errorf("update_weights_from_ipc: total_bytes %d must be > 0", r.TotalBytes)
	}
	type span struct {
		lo, hi int64
		name   string
	}
	spans := make([]span, 0, len(r.Tensors))
	names := make(map[string]bool, len(r.Tensors))
	for _, t := range r.Tensors {
		if t.Name == "" {
			return h, fmt.Errorf("update_weights_from_ipc: a tensor has no name")
		}
		if names[t.Name] {
			return h, fmt.Errorf("update_weights_from_ipc: tensor %q listed twice", t.Name)
		}
		names[t.Name] = true
		n, err := t.TensorBytes()
		if err != nil {
			return h, fmt.Errorf("update_weights_from_ipc: %w", err)
		}
		if t.OffsetBytes < 0 || t.OffsetBytes > r.TotalBytes || n > r.TotalBytes-t.OffsetBytes {
			return h, fmt.Errorf("update_weights_from_ipc: tensor %q: bytes [%d, %d) outside total_bytes %d", t.Name, t.OffsetBytes, t.OffsetBytes+n, r.TotalBytes)
		}
		if a := ipcDTypeBytes[t.DType]; t.OffsetBytes%a != 0 {
			return h, fmt.Errorf("update_weights_from_ipc: tensor %q: offset_bytes %d is not a multiple of its %d-byte elements", t.Name, t.OffsetBytes, a)
		}
		if n > 0 {
			spans = append(spans, span{t.OffsetBytes, t.OffsetBytes + n, t.Name})
		}
	}
	slices.SortFunc(spans, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return h, fmt.Errorf("update_weights_from_ipc: tensors %q and %q overlap", spans[i-1].name, spans[i].name)
		}
	}
	return h, nil
}
