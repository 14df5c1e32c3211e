package protocol

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// ipcRequestExample is a two-layer-norm slice of a real export: 64-byte handle, GPU UUID, tensors
// packed at 128-byte alignment.
func ipcRequestExample() UpdateWeightsFromIPCRequest {
	var h [IPCHandleBytes]byte
	for i := range h {
		h[i] = byte(i * 7)
	}
	r := NewUpdateWeightsFromIPC(h, "GPU-5e2b0c3a-1f4d-4b6e-9a70-3c2d1e0f9a8b", []IPCTensor{
		{Name: "model.embed_tokens.weight", DType: "bfloat16", Shape: []int64{151936, 2048}, OffsetBytes: 0},
		{Name: "model.layers.0.input_layernorm.weight", DType: "bfloat16", Shape: []int64{2048}, OffsetBytes: 622329856},
	}, 622333952)
	r.WeightVersion, r.FlushCache = ptr("12"), ptr(true)
	return r
}

func TestUpdateWeightsFromIPCValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(r *UpdateWeightsFromIPCRequest)
		want string // "" = valid
	}{
		{"example", func(*UpdateWeightsFromIPCRequest) {}, ""},
		{"empty tensor", func(r *UpdateWeightsFromIPCRequest) {
			r.Tensors = append(r.Tensors, IPCTensor{Name: "x", DType: "float32", Shape: []int64{0}, OffsetBytes: r.TotalBytes})
		}, ""},
		{"handle not base64", func(r *UpdateWeightsFromIPCRequest) { r.IPCHandle = "!!" }, "base64"},
		{"handle short", func(r *UpdateWeightsFromIPCRequest) {
			r.IPCHandle = base64.StdEncoding.EncodeToString(make([]byte, 63))
		}, "63 bytes"},
		{"no device", func(r *UpdateWeightsFromIPCRequest) { r.Device = "" }, "device"},
		{"no tensors", func(r *UpdateWeightsFromIPCRequest) { r.Tensors = nil }, "no tensors"},
		{"no total", func(r *UpdateWeightsFromIPCRequest) { r.TotalBytes = 0 }, "total_bytes"},
		{"unnamed", func(r *UpdateWeightsFromIPCRequest) { r.Tensors[1].Name = "" }, "no name"},
		{"duplicate", func(r *UpdateWeightsFromIPCRequest) { r.Tensors[1].Name = r.Tensors[0].Name }, "twice"},
		{"dtype", func(r *UpdateWeightsFromIPCRequest) { r.Tensors[0].DType = "int8" }, "dtype"},
		{"negative dim", func(r *UpdateWeightsFromIPCRequest) { r.Tensors[0].Shape[0] = -1 }, "negative"},
		{"overflow", func(r *UpdateWeightsFromIPCRequest) { r.Tensors[0].Shape = []int64{1 << 40, 1 << 40} }, "too large"},
		{"past total", func(r *UpdateWeightsFromIPCRequest) { r.TotalBytes -= 2 }, "outside"},
		{"negative offset", func(r *UpdateWeightsFromIPCRequest) { r.Tensors[1].OffsetBytes = -2 }, "outside"},
		{"misaligned", func(r *UpdateWeightsFromIPCRequest) { r.Tensors[1].OffsetBytes-- }, "multiple"},
		{"overlap", func(r *UpdateWeightsFromIPCRequest) { r.Tensors[1].OffsetBytes = 4096 }, "overlap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ipcRequestExample()
			tc.edit(&r)
			b, _ := json.Marshal(r)
			_, h, err := DecodeUpdateWeightsFromIPCRequest(b)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if h[1] != 7 || h[63] != byte(63*7%256) {
					t.Fatalf("handle decoded as %x", h)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeUpdateWeightsFromIPCRequest: the parser never panics, and an accepted request's
// tensors lie inside the buffer without overlapping, so a server can copy them blindly.
func FuzzDecodeUpdateWeightsFromIPCRequest(f *testing.F) {
	good, _ := json.Marshal(ipcRequestExample())
	f.Add(good)
	for _, s := range []string{`{}`, `[]`, `{"ipc_handle": 5}`, `{"tensors": [{"shape": [-1]}]}`,
		`{"ipc_handle":"` + base64.StdEncoding.EncodeToString(make([]byte, 64)) + `","device":"GPU-0","total_bytes":8,` +
			`"tensors":[{"name":"a","dtype":"float32","shape":[1],"offset_bytes":4},{"name":"b","dtype":"bfloat16","shape":[2],"offset_bytes":2}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, _, err := DecodeUpdateWeightsFromIPCRequest(body)
		if err != nil {
			return
		}
		used := make([]bool, min(r.TotalBytes, 1<<16))
		for _, tn := range r.Tensors {
			n, err := tn.TensorBytes()
			if err != nil || tn.OffsetBytes < 0 || tn.OffsetBytes+n > r.TotalBytes {
				t.Fatalf("accepted tensor %+v outside %d bytes (%v)", tn, r.TotalBytes, err)
			}
			for i := tn.OffsetBytes; i < tn.OffsetBytes+n && i < int64(len(used)); i++ {
				if used[i] {
					t.Fatalf("accepted overlapping tensors at byte %d", i)
				}
				used[i] = true
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := DecodeUpdateWeightsFromIPCRequest(b); err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
	})
}
