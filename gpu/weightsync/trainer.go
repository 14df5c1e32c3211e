package weightsync

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/safetensors"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/protocol"
)

// Source is rank 0's weights at the moment of a call: a buffer in the group's memory (host bytes
// for tcp, device memory for nccl), typed bf16, and the tensors in it in broadcast order. The
// buffer must stay unchanged until the broadcast that follows has returned (the trainer reloads
// its servers between two steps).
type Source func() (collective.Buffer, []gpu.IPCTensor, error)

// HostSource is the weights of be (its fp32 masters, gpu.WeightExporter: the pure-Go backend, a
// data-parallel group of them) rounded to bf16 as a bf16 checkpoint rounds them
// (safetensors.BF16FromFloat32s, round to nearest even), packed in gpu.ParamSpecs order into a
// host buffer: a server receives bit for bit the checkpoint of the same version.
func HostSource(be gpu.WeightExporter) Source {
	var buf []byte
	return func() (collective.Buffer, []gpu.IPCTensor, error) {
		w, err := be.Weights()
		if err != nil {
			return collective.Buffer{}, nil, fmt.Errorf("weightsync: the trainer's weights: %w", err)
		}
		specs := gpu.ParamSpecs(w.Config)
		ts := make([]gpu.IPCTensor, len(specs))
		for i, s := range specs {
			ts[i] = gpu.IPCTensor{Name: s.Name, DType: gpu.BF16, Shape: append([]int(nil), s.Shape...)}
		}
		ts, total := Packed(ts)
		if int64(cap(buf)) < total {
			buf = make([]byte, total)
		}
		buf = buf[:total]
		for _, t := range ts {
			x, ok := w.Tensors[t.Name]
			if !ok || int64(len(x))*2 != t.Bytes() {
				return collective.Buffer{}, nil, fmt.Errorf("weightsync: the trainer's weights have no tensor %s of shape %v", t.Name, t.Shape)
			}
			safetensors.BF16FromFloat32s(unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(buf[t.Offset:]))), len(x)), x)
		}
		return collective.HostBytes(buf, collective.BF16), ts, nil
	}
}

// DeviceWeights is implemented by backends whose bf16 working weights lie in one device buffer
// (gpu/cuda's Backend: the buffer its CUDA IPC export shares). WeightBuffer waits for the last
// step's kernels, so the buffer holds its weights, and returns it with its tensors and CUDA
// device ordinal.
type DeviceWeights interface {
	WeightBuffer() (ptr unsafe.Pointer, ts []gpu.IPCTensor, device int, err error)
}

// DeviceSource is be's bf16 working weights in place (no copy): nccl broadcasts each tensor
// from its own offset.
func DeviceSource(be DeviceWeights) Source {
	return func() (collective.Buffer, []gpu.IPCTensor, error) {
		p, ts, _, err := be.WeightBuffer()
		if err != nil {
			return collective.Buffer{}, nil, err
		}
		var end int64
		for _, t := range ts {
			end = max(end, t.Offset+t.Bytes())
		}
		return collective.DeviceBuffer(p, int(end/2), collective.BF16), ts, nil
	}
}

// Trainer is the trainer's rank 0 of weight-sync groups (llm.WeightSyncSource).
type Trainer struct {
	backend           string
	listen, advertise string
	group             string
	device            int
	src               Source
	mu                sync.Mutex // one snapshot or broadcast at a time (Source's buffer is reused)
}

var _ llm.WeightSyncSource = (*Trainer)(nil)

// NewTrainer returns rank 0 of groups of backend ("tcp" or "nccl") named group, whose rendezvous
// listens on listen (host:port, port 0 for any) and is advertised to the servers as advertise
// (empty: listen's host). device is the CUDA device of src's buffer (nccl).
func NewTrainer(backend, listen, advertise, group string, device int, src Source) (*Trainer, error) {
	if backend != protocol.WeightSyncTCP && backend != protocol.WeightSyncNCCL {
		return nil, fmt.Errorf("weightsync: backend %q: want %s or %s", backend, protocol.WeightSyncTCP, protocol.WeightSyncNCCL)
	}
	if backend == protocol.WeightSyncNCCL && ncclSide == nil {
		return nil, ErrNoNCCL
	}
	if group == "" {
		group = protocol.DefaultWeightGroup
	}
	return &Trainer{backend: backend, listen: listen, advertise: advertise, group: group, device: device, src: src}, nil
}

// Backend implements llm.WeightSyncSource.
func (t *Trainer) Backend() string { return t.backend }

// Listen implements llm.WeightSyncSource.
func (t *Trainer) Listen(world int) (llm.WeightSyncHost, error) {
	h, err := Listen(t.backend, t.listen, t.advertise, t.group, world, t.device)
	if err != nil {
		return nil, err
	}
	return &trainerHost{h: h, t: t}, nil
}

type trainerHost struct {
	h *Host
	t *Trainer
}

func (h *trainerHost) Request() protocol.InitWeightsUpdateGroupRequest { return h.h.Request }
func (h *trainerHost) Close() error                                    { return h.h.Close() }

func (h *trainerHost) Join(ctx context.Context) (llm.WeightSyncGroup, error) {
	c, err := h.h.Join(ctx)
	if err != nil {
		return nil, err
	}
	return &trainerGroup{c: c, t: h.t}, nil
}

// trainerGroup is rank 0 of a formed group.
type trainerGroup struct {
	c   collective.Comm
	t   *Trainer
	buf collective.Buffer
	ts  []gpu.IPCTensor
}

// Prepare implements llm.WeightSyncGroup: the weights now, and their tensors in broadcast order.
func (g *trainerGroup) Prepare() ([]protocol.IPCTensor, error) {
	g.t.mu.Lock()
	defer g.t.mu.Unlock()
	buf, ts, err := g.t.src()
	if err != nil {
		return nil, err
	}
	g.buf, g.ts = buf, ts
	out := ProtocolTensors(ts)
	for i := range out {
		out[i].OffsetBytes = 0 // the body carries no offsets: the receivers pack
	}
	return out, nil
}

// Broadcast implements llm.WeightSyncGroup: the prepared weights, tensor by tensor. If ctx ends
// first the group is closed, which fails the collective in flight on every rank (the hub ends
// the world; NCCL aborts the communicator) instead of leaving anyone waiting.
func (g *trainerGroup) Broadcast(ctx context.Context) error {
	if g.ts == nil {
		return fmt.Errorf("weightsync: broadcast before prepare")
	}
	g.t.mu.Lock()
	defer g.t.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { g.c.Close() })
	defer stop()
	err := Broadcast(g.c, g.buf, g.ts)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(ctx))
	}
	return err
}

// Close implements llm.WeightSyncGroup.
func (g *trainerGroup) Close() error { return g.c.Close() }
