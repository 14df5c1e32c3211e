//go:build cuda

package nccl

/*
#cgo CFLAGS: -I${SRCDIR}/csrc
#cgo LDFLAGS: -L${SRCDIR}/build -lt2nccl -lnccl -lcudart -lstdc++
#include "t2nccl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"tau2rl/gpu/collective"
)

// IDBytes is the size of an NCCL unique id.
const IDBytes = C.T2N_UNIQUE_ID_BYTES

// Error is a failed NCCL or CUDA call of the shim.
type Error struct {
	Code int // ncclResult_t, or 10000 + cudaError_t
	Call string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("t2nccl.cu:%d: %s: %s (code %d)", e.Line, e.Call, e.Msg, e.Code)
}

func statusErr(s C.t2n_status) error {
	if s.code == 0 {
		return nil
	}
	e := &Error{Code: int(s.code), Line: int(s.line)}
	if s.call != nil {
		e.Call = C.GoString(s.call)
	}
	if s.msg != nil {
		e.Msg = C.GoString(s.msg)
	}
	return e
}

// Version is NCCL's version code (e.g. 22005 for 2.20.5).
func Version() (int, error) {
	var v C.int
	if err := statusErr(C.t2n_version(&v)); err != nil {
		return 0, fmt.Errorf("nccl: %w", err)
	}
	return int(v), nil
}

// UniqueID makes a new NCCL unique id (on the host that will serve it: rank 0's).
func UniqueID() ([]byte, error) {
	id := make([]byte, IDBytes)
	if err := statusErr(C.t2n_get_unique_id((*C.char)(unsafe.Pointer(&id[0])))); err != nil {
		return nil, fmt.Errorf("nccl: unique id: %w", err)
	}
	return id, nil
}

// scratchF64 is the device scratch of AllReduceFloat64, in doubles per call.
const scratchF64 = 64

// Comm is one GPU's rank of an NCCL communicator.
type Comm struct {
	comm        unsafe.Pointer
	device      int
	rank, world int
	scratch     unsafe.Pointer
	closed      bool
}

var _ collective.Comm = (*Comm)(nil)

// New joins rank rank of a world-rank communicator on CUDA device `device`. It blocks until every
// rank has joined (ncclCommInitRank).
func New(id []byte, rank, world, device int) (*Comm, error) {
	if len(id) != IDBytes {
		return nil, fmt.Errorf("nccl: unique id of %d bytes, want %d", len(id), IDBytes)
	}
	if world < 1 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("nccl: rank %d of world %d", rank, world)
	}
	c := &Comm{device: device, rank: rank, world: world}
	if err := statusErr(C.t2n_comm_init(&c.comm, C.int(device), C.int(world), C.int(rank), (*C.char)(unsafe.Pointer(&id[0])))); err != nil {
		return nil, fmt.Errorf("nccl: init rank %d of %d on device %d: %w", rank, world, device, err)
	}
	if err := statusErr(C.t2n_malloc(C.int(device), &c.scratch, C.size_t(8*scratchF64))); err != nil {
		C.t2n_comm_destroy(c.comm, C.int(device))
		return nil, fmt.Errorf("nccl: scratch on device %d: %w", device, err)
	}
	return c, nil
}

// NewHost joins the ranks firstRank, firstRank+1, … of a world-rank communicator on devices (one
// per rank, in order) concurrently, as one process driving its host's GPUs must.
func NewHost(id []byte, firstRank, world int, devices []int) ([]collective.Comm, error) {
	comms := make([]*Comm, len(devices))
	errs := make([]error, len(devices))
	var wg sync.WaitGroup
	for i, dev := range devices {
		wg.Go(func() { comms[i], errs[i] = New(id, firstRank+i, world, dev) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.abort()
			}
		}
		return nil, err
	}
	out := make([]collective.Comm, len(comms))
	for i, c := range comms {
		out[i] = c
	}
	return out, nil
}

func (c *Comm) Rank() int { return c.rank }
func (c *Comm) Size() int { return c.world }

// Device is the CUDA device ordinal of this rank.
func (c *Comm) Device() int { return c.device }

var errClosed = errors.New("nccl: communicator is closed")

func (c *Comm) check(op string, bs ...collective.Buffer) error {
	if c.closed {
		return errClosed
	}
	for _, b := range bs {
		if b.Host != nil || (b.N > 0 && b.Ptr == nil) {
			return fmt.Errorf("nccl: %s: buffers must be device memory", op)
		}
	}
	return nil
}

func dtype(d collective.DType) C.int {
	if d == collective.BF16 {
		return 1
	}
	return 0
}

func (c *Comm) AllReduceSum(buf collective.Buffer) error {
	if err := c.check("all-reduce", buf); err != nil {
		return err
	}
	if buf.DType != collective.F32 {
		return fmt.Errorf("nccl: all-reduce sums fp32, got %s", buf.DType)
	}
	return c.wrap("all-reduce", C.t2n_all_reduce_sum(c.comm, C.int(c.device), buf.Ptr, C.size_t(buf.N)))
}

func (c *Comm) ReduceScatterSum(send, recv collective.Buffer) error {
	if err := c.check("reduce-scatter", send, recv); err != nil {
		return err
	}
	if send.DType != collective.F32 || recv.DType != collective.F32 {
		return fmt.Errorf("nccl: reduce-scatter sums fp32")
	}
	if send.N != c.world*recv.N {
		return fmt.Errorf("nccl: reduce-scatter of %d elements into %d-element shards over %d ranks", send.N, recv.N, c.world)
	}
	return c.wrap("reduce-scatter", C.t2n_reduce_scatter_sum(c.comm, C.int(c.device), send.Ptr, recv.Ptr, C.size_t(recv.N)))
}

func (c *Comm) AllGather(send, recv collective.Buffer) error {
	if err := c.check("all-gather", send, recv); err != nil {
		return err
	}
	if send.DType != recv.DType {
		return fmt.Errorf("nccl: all-gather from %s into %s", send.DType, recv.DType)
	}
	if recv.N != c.world*send.N {
		return fmt.Errorf("nccl: all-gather of %d-element blocks into %d elements over %d ranks", send.N, recv.N, c.world)
	}
	return c.wrap("all-gather", C.t2n_all_gather(c.comm, C.int(c.device), send.Ptr, recv.Ptr, C.size_t(send.N), dtype(send.DType)))
}

func (c *Comm) Broadcast(buf collective.Buffer, root int) error {
	if err := c.check("broadcast", buf); err != nil {
		return err
	}
	if root < 0 || root >= c.world {
		return fmt.Errorf("nccl: broadcast root %d outside [0,%d)", root, c.world)
	}
	return c.wrap("broadcast", C.t2n_broadcast(c.comm, C.int(c.device), buf.Ptr, C.size_t(buf.N), dtype(buf.DType), C.int(root)))
}

func (c *Comm) AllReduceFloat64(vals []float64) error {
	if c.closed {
		return errClosed
	}
	for lo := 0; lo < len(vals); lo += scratchF64 {
		n := min(scratchF64, len(vals)-lo)
		s := C.t2n_all_reduce_f64(c.comm, C.int(c.device), (*C.double)(unsafe.Pointer(&vals[lo])), C.int(n), c.scratch)
		if err := c.wrap("all-reduce f64", s); err != nil {
			return err
		}
	}
	return nil
}

func (c *Comm) wrap(op string, s C.t2n_status) error {
	if err := statusErr(s); err != nil {
		return fmt.Errorf("nccl: %s on rank %d (device %d): %w", op, c.rank, c.device, err)
	}
	return nil
}

// abort tears the communicator down without waiting for peers (after a failure).
func (c *Comm) abort() {
	if c.closed {
		return
	}
	c.closed = true
	C.t2n_comm_abort(c.comm, C.int(c.device))
	C.t2n_free(C.int(c.device), c.scratch)
}

// Close aborts the communicator: gpu/dp closes comms after a failed collective (peers may be
// stuck inside it, and ncclCommAbort releases them with an error) and at shutdown, when every
// rank closes anyway.
func (c *Comm) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	errs := []error{statusErr(C.t2n_comm_abort(c.comm, C.int(c.device))), statusErr(C.t2n_free(C.int(c.device), c.scratch))}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nccl: close rank %d: %w", c.rank, err)
	}
	return nil
}
