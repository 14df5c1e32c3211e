// Package weightsync moves a trainer's bf16 weights to tau2-samplers on other GPUs or hosts by a
// broadcast from the trainer's rank 0 over a weight-sync group the samplers join (issue 29;
// SGLang's POST /init_weights_update_group and /update_weights_from_distributed, docs/INFERENCE.md
// §4c). The group is a collective.Comm: gpu/collective's host-memory TCP hub (backend "tcp": the
// pure-Go backend, and every test on a machine without GPUs) or NCCL over device buffers (backend
// "nccl", build tag cuda). The orchestration — rendezvous, the tensor order, staging, the
// checks — is the same code for both; only the memory the buffers live in differs.
//
// The tensors travel one broadcast each, in the order of the request's names, from rank 0's
// buffer (the cuda backend's bf16 working copy, the buffer its CUDA IPC export shares; on the
// pure-Go backend a host buffer of its weights rounded to bf16) into a receiver's staging buffer,
// packed in that order. One broadcast per tensor rather than one of a flat buffer because SGLang's
// body has names, dtypes and shapes but no offsets: a tensor-by-tensor order is the only layout
// both ends derive from it alone, the sender needs no contiguous copy whatever its layout, and the
// host hub's messages stay one tensor long. The cost is one collective per tensor (~310 at
// Qwen3-1.7B), each waiting for completion; unmeasured on GPUs (no several-GPU machine yet).
//
// A receiver swaps the staged weights in only after every tensor has arrived, so a sender or a
// peer that fails mid-update leaves it serving the old weights whole.
package weightsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/lib/inference/protocol"
)

// ncclSide is the NCCL side of the package, set by nccl_cuda.go in builds with the cuda tag.
var ncclSide interface {
	// join fetches the id from addr as host rank of job and joins rank of world on device.
	join(ctx context.Context, addr, job string, rank, world, device int) (collective.Comm, error)
	// host makes an id, serves it on ln to the world−1 other ranks and joins rank 0 on device;
	// it returns once every rank has joined.
	host(ctx context.Context, ln net.Listener, job string, world, device int) (collective.Comm, error)
}

// ErrNoNCCL is the error of backend "nccl" in a build without the cuda tag.
var ErrNoNCCL = errors.New("weightsync: this build has no NCCL (build with -tags cuda, or use backend tcp)")

// HaveNCCL reports whether this build can join an NCCL group.
func HaveNCCL() bool { return ncclSide != nil }

// retry is how often a rank redials a rendezvous that is not up yet.
const retry = 20 * time.Millisecond

// Join joins a server's rank (req.RankOffset) of the group req describes: it dials the hub (tcp)
// or fetches the NCCL id and initialises its communicator on CUDA device `device` (nccl),
// retrying until ctx ends (the trainer may open the rendezvous a moment later).
func Join(ctx context.Context, req protocol.InitWeightsUpdateGroupRequest, device int) (collective.Comm, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	switch req.Backend {
	case protocol.WeightSyncTCP:
		return collective.DialHub(ctx, req.Addr(), req.GroupName, req.RankOffset, req.WorldSize, retry)
	case protocol.WeightSyncNCCL:
		if ncclSide == nil {
			return nil, ErrNoNCCL
		}
		return ncclSide.join(ctx, req.Addr(), req.GroupName, req.RankOffset, req.WorldSize, device)
	}
	return nil, fmt.Errorf("weightsync: backend %q", req.Backend)
}

// Host is the trainer's end of a group being formed: the rendezvous it serves and what the
// servers are told to join.
type Host struct {
	// Request is the body of /init_weights_update_group without rank_offset.
	Request protocol.InitWeightsUpdateGroupRequest
	ln      net.Listener
	device  int
	hub     chan error
}

// Listen opens the rendezvous of a new world-rank group named group on listen (host:port; port 0
// picks a free one) for backend ("tcp" or "nccl"). advertise is the host the servers dial
// (master_address): the listen host when empty. device is the CUDA device of rank 0's weights
// (nccl). Join then completes rank 0.
func Listen(backend, listen, advertise, group string, world, device int) (*Host, error) {
	if backend == protocol.WeightSyncNCCL && ncclSide == nil {
		return nil, ErrNoNCCL
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("weightsync: listen for the weight-sync rendezvous: %w", err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if advertise != "" {
		host = advertise
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("weightsync: listening on %s, the servers need an address to dial: set the advertised host (reload.sync.address)", ln.Addr())
	}
	var p int
	fmt.Sscan(port, &p)
	req := protocol.InitWeightsUpdateGroupRequest{MasterAddress: host, MasterPort: p, WorldSize: world, GroupName: group, Backend: backend, RankOffset: 1}
	if err := req.Validate(); err != nil {
		ln.Close()
		return nil, err
	}
	req.RankOffset = 0
	return &Host{Request: req, ln: ln, device: device}, nil
}

// Join serves the rendezvous and joins rank 0. For tcp it returns once the hub has taken rank 0
// (the servers' own init calls report their joins); for nccl once every rank has joined. ctx
// bounds the wait for the other ranks; on error the rendezvous is closed.
func (h *Host) Join(ctx context.Context) (collective.Comm, error) {
	r := h.Request
	if r.Backend == protocol.WeightSyncNCCL {
		return ncclSide.host(ctx, h.ln, r.GroupName, r.WorldSize, h.device)
	}
	h.hub = make(chan error, 1)
	go func() { h.hub <- collective.ServeHub(ctx, h.ln, r.GroupName, r.WorldSize) }()
	c, err := collective.DialHub(ctx, h.ln.Addr().String(), r.GroupName, 0, r.WorldSize, retry)
	if err != nil {
		h.ln.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the rendezvous (a group never joined).
func (h *Host) Close() error { return h.ln.Close() }

// Packed lays ts out one after the other from offset 0 in their order (a receiver's staging
// buffer, protocol.UpdateWeightsFromDistributedRequest.Tensors' layout) and returns the total.
func Packed(ts []gpu.IPCTensor) ([]gpu.IPCTensor, int64) {
	out := make([]gpu.IPCTensor, len(ts))
	var off int64
	for i, t := range ts {
		t.Offset = off
		off += t.Bytes()
		out[i] = t
	}
	return out, off
}

// span is t's elements in buf, a buffer of bytes laid out as ts's offsets say.
func span(buf collective.Buffer, t gpu.IPCTensor) (collective.Buffer, error) {
	dt, err := collDType(t.DType)
	if err != nil {
		return collective.Buffer{}, err
	}
	es := int64(dt.Size())
	if t.Offset%es != 0 {
		return collective.Buffer{}, fmt.Errorf("weightsync: tensor %s at byte %d is not aligned to its %d-byte elements", t.Name, t.Offset, es)
	}
	lo, n := t.Offset/es, t.Bytes()/es
	if lo+n > int64(buf.N) {
		return collective.Buffer{}, fmt.Errorf("weightsync: tensor %s (elements [%d, %d)) past the %d-element buffer", t.Name, lo, lo+n, buf.N)
	}
	return buf.Slice(int(lo), int(lo+n)), nil
}

func collDType(d gpu.DType) (collective.DType, error) {
	switch d {
	case gpu.BF16:
		return collective.BF16, nil
	}
	return 0, fmt.Errorf("weightsync: tensors travel as bf16, not %s", d)
}

// Broadcast sends every tensor of ts from buf (rank 0's weights: bytes laid out at ts's offsets,
// typed bf16) over c, one broadcast per tensor in ts's order. Every receiver calls Receive with
// the same tensors.
func Broadcast(c collective.Comm, buf collective.Buffer, ts []gpu.IPCTensor) error {
	for _, t := range ts {
		s, err := span(buf, t)
		if err != nil {
			return err
		}
		if err := c.Broadcast(s, 0); err != nil {
			return fmt.Errorf("weightsync: broadcast tensor %s: %w", t.Name, err)
		}
	}
	return nil
}

// Receive takes every tensor of ts (packed offsets) into staging, the receiver's buffer of their
// total bytes, in the order rank 0 sends them.
func Receive(c collective.Comm, staging collective.Buffer, ts []gpu.IPCTensor) error {
	for _, t := range ts {
		s, err := span(staging, t)
		if err != nil {
			return err
		}
		if err := c.Broadcast(s, 0); err != nil {
			return fmt.Errorf("weightsync: receive tensor %s: %w", t.Name, err)
		}
	}
	return nil
}

// Tensors converts a request's tensors to gpu's.
func Tensors(ts []protocol.IPCTensor) []gpu.IPCTensor {
	out := make([]gpu.IPCTensor, len(ts))
	for i, t := range ts {
		shape := make([]int, len(t.Shape))
		for j, d := range t.Shape {
			shape[j] = int(d)
		}
		out[i] = gpu.IPCTensor{Name: t.Name, DType: gpu.DType(t.DType), Shape: shape, Offset: t.OffsetBytes}
	}
	return out
}

// ProtocolTensors converts gpu's tensors to a request's.
func ProtocolTensors(ts []gpu.IPCTensor) []protocol.IPCTensor {
	out := make([]protocol.IPCTensor, len(ts))
	for i, t := range ts {
		shape := make([]int64, len(t.Shape))
		for j, d := range t.Shape {
			shape[j] = int64(d)
		}
		out[i] = protocol.IPCTensor{Name: t.Name, DType: string(t.DType), Shape: shape, OffsetBytes: t.Offset}
	}
	return out
}
