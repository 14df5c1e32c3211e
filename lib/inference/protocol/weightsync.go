package protocol

import (
	"encoding/json"
	"fmt"
	"net"
)

// The weight-sync group (docs/INFERENCE.md §4c): a trainer on other GPUs than its samplers sends
// them its weights by a broadcast from its rank 0 over a communicator the samplers join. The
// endpoints and their bodies are SGLang's (POST /init_weights_update_group, POST
// /update_weights_from_distributed), but the rendezvous behind master_address:master_port is
// tau2rl's own (gpu/collective: an NCCL unique id served over TCP, or the host-memory TCP hub),
// not torch.distributed's TCPStore: a real SGLang server cannot join a tau2rl trainer's group,
// nor a tau2-sampler an SGLang trainer's. The trainer uses the group only with servers whose
// GET /model_info lists the backend in weight_sync (ModelInfo.WeightSync).

// Weight-sync backends (InitWeightsUpdateGroupRequest.Backend).
const (
	// WeightSyncNCCL: NCCL over device buffers (gpu/collective/nccl; tau2-sampler built with the
	// cuda tag). The id is served by the trainer's rank 0 at master_address:master_port
	// (collective.ServeID) and every sampler fetches it as host rank_offset.
	WeightSyncNCCL = "nccl"
	// WeightSyncTCP: gpu/collective's host-memory hub, served by the trainer's rank 0 at
	// master_address:master_port (collective.ServeHub); for the pure-Go backend and tests.
	WeightSyncTCP = "tcp"
	// DefaultWeightGroup is SGLang's default group_name.
	DefaultWeightGroup = "weight_update_group"
)

// InitWeightsUpdateGroupRequest is the body of POST /init_weights_update_group: join rank
// rank_offset of a world_size-rank group named group_name whose rank 0 (the trainer) serves the
// rendezvous at master_address:master_port. The answer is UpdateWeightsResponse (success,
// message), sent once the server has joined or given up.
type InitWeightsUpdateGroupRequest struct {
	MasterAddress string `json:"master_address"`
	MasterPort    int    `json:"master_port"`
	// RankOffset is the server's rank (SGLang adds its tensor-parallel rank; tau2-sampler has
	// one). Rank 0 is the trainer's.
	RankOffset int    `json:"rank_offset"`
	WorldSize  int    `json:"world_size"`
	GroupName  string `json:"group_name,omitempty"`
	Backend    string `json:"backend,omitempty"`
}

// DecodeInitWeightsUpdateGroupRequest parses a body, fills SGLang's defaults (group_name
// "weight_update_group", backend "nccl") and validates it.
func DecodeInitWeightsUpdateGroupRequest(body []byte) (InitWeightsUpdateGroupRequest, error) {
	var r InitWeightsUpdateGroupRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("init_weights_update_group: %w", err)
	}
	if r.GroupName == "" {
		r.GroupName = DefaultWeightGroup
	}
	if r.Backend == "" {
		r.Backend = WeightSyncNCCL
	}
	return r, r.Validate()
}

// Addr is master_address:master_port.
func (r InitWeightsUpdateGroupRequest) Addr() string {
	return net.JoinHostPort(r.MasterAddress, fmt.Sprint(r.MasterPort))
}

// Validate checks the address, a world of at least the trainer and one server, a server rank
// in [1, world_size), a group name (it keeps two groups on one port apart) and a known backend.
func (r InitWeightsUpdateGroupRequest) Validate() error {
	switch {
	case r.MasterAddress == "":
		return fmt.Errorf("init_weights_update_group: master_address is required")
	case r.MasterPort < 1 || r.MasterPort > 65535:
		return fmt.Errorf("init_weights_update_group: master_port %d outside [1, 65535]", r.MasterPort)
	case r.WorldSize < 2:
		return fmt.Errorf("init_weights_update_group: world_size %d: the group needs the trainer's rank 0 and at least one server", r.WorldSize)
	case r.RankOffset < 1 || r.RankOffset >= r.WorldSize:
		return fmt.Errorf("init_weights_update_group: rank_offset %d outside [1, world_size %d): rank 0 is the trainer's", r.RankOffset, r.WorldSize)
	case r.GroupName == "":
		return fmt.Errorf("init_weights_update_group: group_name is required")
	case r.Backend != WeightSyncNCCL && r.Backend != WeightSyncTCP:
		return fmt.Errorf("init_weights_update_group: backend %q: want %q (device buffers) or %q (gpu/collective's host hub)", r.Backend, WeightSyncNCCL, WeightSyncTCP)
	}
	return nil
}

// UpdateWeightsFromDistributedRequest is the body of POST /update_weights_from_distributed: the
// trainer's rank 0 broadcasts each tensor of names, in that order, over the group group_name,
// with dtypes[i] and shapes[i]; the server receives them all, then swaps them in. The answer is
// UpdateWeightsResponse.
type UpdateWeightsFromDistributedRequest struct {
	Names     []string  `json:"names"`
	DTypes    []string  `json:"dtypes"`
	Shapes    [][]int64 `json:"shapes"`
	GroupName string    `json:"group_name,omitempty"`
	// FlushCache as SGLang's (tau2-sampler always flushes: its cache entries were computed with
	// the old weights).
	FlushCache       *bool   `json:"flush_cache,omitempty"`
	WeightVersion    *string `json:"weight_version,omitempty"`
	AbortAllRequests bool    `json:"abort_all_requests,omitempty"`
	// LoadFormat is SGLang's (e.g. "flattened_bucket"); tau2-sampler takes only tensors one by
	// one (absent or "").
	LoadFormat *string `json:"load_format,omitempty"`
}

// DecodeUpdateWeightsFromDistributedRequest parses a body, fills the default group_name and
// validates it (Validate).
func DecodeUpdateWeightsFromDistributedRequest(body []byte) (UpdateWeightsFromDistributedRequest, error) {
	var r UpdateWeightsFromDistributedRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("update_weights_from_distributed: %w", err)
	}
	if r.GroupName == "" {
		r.GroupName = DefaultWeightGroup
	}
	_, err := r.Tensors()
	return r, err
}

// Tensors validates r and returns its tensors in broadcast order, packed one after the other
// from offset 0 (OffsetBytes is the tensor's place in a receiver's flat staging buffer): at least
// one tensor, as many dtypes and shapes as names, unique non-empty names, known dtypes,
// non-negative dimensions, sizes that do not overflow, and the tensor-by-tensor format.
func (r UpdateWeightsFromDistributedRequest) Tensors() ([]IPCTensor, error) {
	if len(r.Names) == 0 {
		return nil, fmt.Errorf("update_weights_from_distributed: no names")
	}
	if len(r.DTypes) != len(r.Names) || len(r.Shapes) != len(r.Names) {
		return nil, fmt.Errorf("update_weights_from_distributed: %d names, %d dtypes and %d shapes: want one of each per tensor", len(r.Names), len(r.DTypes), len(r.Shapes))
	}
	if r.LoadFormat != nil && *r.LoadFormat != "" {
		return nil, fmt.Errorf("update_weights_from_distributed: load_format %q is not supported (tensors are broadcast one by one)", *r.LoadFormat)
	}
	out := make([]IPCTensor, len(r.Names))
	seen := make(map[string]bool, len(r.Names))
	var off int64
	for i, name := range r.Names {
		if name == "" {
			return nil, fmt.Errorf("update_weights_from_distributed: tensor %d has no name", i)
		}
		if seen[name] {
			return nil, fmt.Errorf("update_weights_from_distributed: tensor %q listed twice", name)
		}
		seen[name] = true
		t := IPCTensor{Name: name, DType: r.DTypes[i], Shape: r.Shapes[i], OffsetBytes: off}
		n, err := t.TensorBytes()
		if err != nil {
			return nil, fmt.Errorf("update_weights_from_distributed: %w", err)
		}
		if n > (1<<62)-off {
			return nil, fmt.Errorf("update_weights_from_distributed: the tensors' total size overflows")
		}
		off += n
		out[i] = t
	}
	return out, nil
}

// DistributedTensors is the request for tensors ts (names, dtypes, shapes in ts's order) over
// group; weight_version and flush_cache are the caller's.
func DistributedTensors(group string, ts []IPCTensor) UpdateWeightsFromDistributedRequest {
	r := UpdateWeightsFromDistributedRequest{GroupName: group, Names: make([]string, len(ts)), DTypes: make([]string, len(ts)), Shapes: make([][]int64, len(ts))}
	for i, t := range ts {
		r.Names[i], r.DTypes[i], r.Shapes[i] = t.Name, t.DType, t.Shape
	}
	return r
}
