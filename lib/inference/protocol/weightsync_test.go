package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func initGroupExample() InitWeightsUpdateGroupRequest {
	return InitWeightsUpdateGroupRequest{MasterAddress: "10.0.0.4", MasterPort: 29517, RankOffset: 2, WorldSize: 4,
		GroupName: "tau2rl-weights-run7", Backend: WeightSyncNCCL}
}

func distributedExample() UpdateWeightsFromDistributedRequest {
	r := DistributedTensors("tau2rl-weights-run7", []IPCTensor{
		{Name: "model.embed_tokens.weight", DType: "bfloat16", Shape: []int64{151936, 2048}},
		{Name: "model.layers.0.input_layernorm.weight", DType: "bfloat16", Shape: []int64{2048}},
	})
	r.WeightVersion, r.FlushCache = ptr("12"), ptr(true)
	return r
}

func TestInitWeightsUpdateGroupValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want string // "" = valid
	}{
		{"example", `{"master_address":"10.0.0.4","master_port":29517,"rank_offset":2,"world_size":4,"group_name":"g","backend":"tcp"}`, ""},
		{"sglang defaults", `{"master_address":"h","master_port":1,"rank_offset":1,"world_size":2}`, ""},
		{"not json", `{`, "init_weights_update_group"},
		{"no address", `{"master_port":1,"rank_offset":1,"world_size":2}`, "master_address"},
		{"port 0", `{"master_address":"h","master_port":0,"rank_offset":1,"world_size":2}`, "master_port"},
		{"port too big", `{"master_address":"h","master_port":65536,"rank_offset":1,"world_size":2}`, "master_port"},
		{"world of one", `{"master_address":"h","master_port":1,"rank_offset":0,"world_size":1}`, "world_size 1"},
		{"trainer's rank", `{"master_address":"h","master_port":1,"rank_offset":0,"world_size":2}`, "rank 0 is the trainer's"},
		{"rank past world", `{"master_address":"h","master_port":1,"rank_offset":2,"world_size":2}`, "outside [1, world_size 2)"},
		{"gloo", `{"master_address":"h","master_port":1,"rank_offset":1,"world_size":2,"backend":"gloo"}`, `backend "gloo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeInitWeightsUpdateGroupRequest([]byte(tc.body))
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if r.GroupName == "" || r.Backend == "" {
					t.Fatalf("defaults not filled: %+v", r)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if r, _ := DecodeInitWeightsUpdateGroupRequest([]byte(`{"master_address":"::1","master_port":80,"rank_offset":1,"world_size":2}`)); r.Addr() != "[::1]:80" ||
		r.GroupName != DefaultWeightGroup || r.Backend != WeightSyncNCCL {
		t.Fatalf("addr %s, group %q, backend %q", r.Addr(), r.GroupName, r.Backend)
	}
}

func TestUpdateWeightsFromDistributedValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(r *UpdateWeightsFromDistributedRequest)
		want string // "" = valid
	}{
		{"example", func(*UpdateWeightsFromDistributedRequest) {}, ""},
		{"empty tensor", func(r *UpdateWeightsFromDistributedRequest) {
			r.Names, r.DTypes, r.Shapes = append(r.Names, "x"), append(r.DTypes, "float32"), append(r.Shapes, []int64{0, 3})
		}, ""},
		{"no names", func(r *UpdateWeightsFromDistributedRequest) { r.Names, r.DTypes, r.Shapes = nil, nil, nil }, "no names"},
		{"dtypes short", func(r *UpdateWeightsFromDistributedRequest) { r.DTypes = r.DTypes[:1] }, "2 names, 1 dtypes"},
		{"shapes short", func(r *UpdateWeightsFromDistributedRequest) { r.Shapes = r.Shapes[:1] }, "and 1 shapes"},
		{"unnamed", func(r *UpdateWeightsFromDistributedRequest) { r.Names[1] = "" }, "no name"},
		{"duplicate", func(r *UpdateWeightsFromDistributedRequest) { r.Names[1] = r.Names[0] }, "twice"},
		{"dtype", func(r *UpdateWeightsFromDistributedRequest) { r.DTypes[0] = "torch.bfloat16" }, "dtype"},
		{"negative dim", func(r *UpdateWeightsFromDistributedRequest) { r.Shapes[0][1] = -1 }, "negative"},
		{"overflow", func(r *UpdateWeightsFromDistributedRequest) { r.Shapes[0] = []int64{1 << 40, 1 << 40} }, "too large"},
		{"total overflows", func(r *UpdateWeightsFromDistributedRequest) {
			r.Shapes[0], r.Shapes[1] = []int64{1 << 30, 1 << 31}, []int64{1 << 30, 1 << 31}
		}, "total size overflows"},
		{"bucketed", func(r *UpdateWeightsFromDistributedRequest) { r.LoadFormat = ptr("flattened_bucket") }, "load_format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := distributedExample()
			tc.edit(&r)
			b, _ := json.Marshal(r)
			got, err := DecodeUpdateWeightsFromDistributedRequest(b)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ts, _ := got.Tensors()
			if ts[0].OffsetBytes != 0 || ts[1].OffsetBytes != 151936*2048*2 {
				t.Fatalf("packed offsets %d, %d", ts[0].OffsetBytes, ts[1].OffsetBytes)
			}
		})
	}
	if r, err := DecodeUpdateWeightsFromDistributedRequest([]byte(`{"names":["a"],"dtypes":["float32"],"shapes":[[1]]}`)); err != nil || r.GroupName != DefaultWeightGroup {
		t.Fatalf("default group: %q, %v", r.GroupName, err)
	}
}

// FuzzDecodeUpdateWeightsFromDistributedRequest: the parser never panics; an accepted request
// has one dtype and shape per name and packs its tensors without gaps or overlaps from 0, so a
// receiver can size its staging buffer from the last one and slice it blindly.
func FuzzDecodeUpdateWeightsFromDistributedRequest(f *testing.F) {
	good, _ := json.Marshal(distributedExample())
	f.Add(good)
	for _, s := range []string{`{}`, `[]`, `{"names": 5}`, `{"names":["a"],"dtypes":["bfloat16"],"shapes":[[-1]]}`,
		`{"names":["a","b"],"dtypes":["float16","float32"],"shapes":[[3],[]],"load_format":""}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeUpdateWeightsFromDistributedRequest(body)
		if err != nil {
			return
		}
		ts, err := r.Tensors()
		if err != nil || len(ts) != len(r.Names) || len(r.DTypes) != len(r.Names) || len(r.Shapes) != len(r.Names) {
			t.Fatalf("accepted %+v: tensors %v, %v", r, ts, err)
		}
		var off int64
		for _, tn := range ts {
			n, err := tn.TensorBytes()
			if err != nil || n < 0 || tn.OffsetBytes != off {
				t.Fatalf("tensor %+v at %d, want %d (%v)", tn, tn.OffsetBytes, off, err)
			}
			off += n
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeUpdateWeightsFromDistributedRequest(b); err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
	})
}

// FuzzDecodeInitWeightsUpdateGroupRequest: never panics; an accepted request names a port, a
// server rank inside the world, and a known backend.
func FuzzDecodeInitWeightsUpdateGroupRequest(f *testing.F) {
	good, _ := json.Marshal(initGroupExample())
	f.Add(good)
	for _, s := range []string{`{}`, `{"master_port":"1"}`, `{"master_address":"h","master_port":1,"rank_offset":1,"world_size":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeInitWeightsUpdateGroupRequest(body)
		if err != nil {
			return
		}
		if r.MasterPort < 1 || r.MasterPort > 65535 || r.RankOffset < 1 || r.RankOffset >= r.WorldSize || r.GroupName == "" ||
			(r.Backend != WeightSyncNCCL && r.Backend != WeightSyncTCP) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
