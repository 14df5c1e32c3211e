// Package collective is the communication the data-parallel trainer (gpu/dp) needs between its
// ranks: sum all-reduce, sum reduce-scatter, all-gather and broadcast over flat buffers, plus a
// small all-reduce of host float64 scalars (gradient norms, counts).
//
// Two implementations:
//   - NewLocal: in-process, goroutines as ranks over host memory (Host buffers). Every reduction
//     adds the ranks' contributions in rank order 0, 1, …, N−1, so results are reproducible run to
//     run and the CI tests of gpu/dp can compare an N-rank step with the 1-rank step.
//   - ServeHub/DialHub: host memory across processes (the pure-Go backend on several hosts), a
//     hub that reduces in the same rank order over one TCP connection per rank.
//   - gpu/collective/nccl (build tag cuda): NCCL over device memory (Device buffers), one
//     communicator per GPU, ranks spread over one or several hosts.
//
// The package is pure Go and imports nothing of gpu, so backends (gpu/cpu, gpu/cuda) can hand
// their flat buffers out as Buffer values without an import cycle.
package collective

import (
	"fmt"
	"unsafe"
)

// DType is a buffer's element type. Reductions are defined on F32; BF16 buffers may only be
// all-gathered or broadcast (the CUDA backend all-gathers its bf16 working weights, half the
// traffic of their fp32 masters).
type DType int

const (
	F32 DType = iota
	BF16
)

// Size is the element size in bytes.
func (d DType) Size() int {
	if d == BF16 {
		return 2
	}
	return 4
}

func (d DType) String() string {
	if d == BF16 {
		return "bf16"
	}
	return "f32"
}

// Buffer is a contiguous run of N elements in the memory a Comm works on: host memory (Host set,
// F32 only) for the in-process comm, device memory (Ptr set) for NCCL. Raw is host memory as
// bytes of any DType, which the host communicators (NewLocal, the TCP hub) take for Broadcast
// only: the weight-sync group (gpu/weightsync) broadcasts bf16 weights bit for bit, which a
// float32 slice could not carry (a bf16 pair can read as a signalling NaN, which conversions
// quieten).
type Buffer struct {
	Host  []float32      // host memory; nil for device buffers
	Raw   []byte         // host memory as bytes (Broadcast on host comms only)
	Ptr   unsafe.Pointer // device memory (cudaMalloc'd); nil for host buffers
	N     int            // elements
	DType DType
}

// HostBuffer wraps a host fp32 slice.
func HostBuffer(x []float32) Buffer { return Buffer{Host: x, N: len(x), DType: F32} }

// HostBytes wraps host memory holding len(b)/dt.Size() elements of type dt (Buffer.Raw).
func HostBytes(b []byte, dt DType) Buffer {
	return Buffer{Raw: b[:len(b)/dt.Size()*dt.Size()], N: len(b) / dt.Size(), DType: dt}
}

// DeviceBuffer describes n elements of type dt at device address p.
func DeviceBuffer(p unsafe.Pointer, n int, dt DType) Buffer { return Buffer{Ptr: p, N: n, DType: dt} }

// Len is the element count.
func (b Buffer) Len() int { return b.N }

// Slice returns elements [lo, hi) of b.
func (b Buffer) Slice(lo, hi int) Buffer {
	if lo < 0 || hi < lo || hi > b.N {
		panic(fmt.Sprintf("collective: slice [%d:%d] of a %d-element buffer", lo, hi, b.N))
	}
	if b.Host != nil {
		return HostBuffer(b.Host[lo:hi:hi])
	}
	if b.Raw != nil {
		sz := b.DType.Size()
		return Buffer{Raw: b.Raw[lo*sz : hi*sz : hi*sz], N: hi - lo, DType: b.DType}
	}
	return Buffer{Ptr: unsafe.Add(b.Ptr, lo*b.DType.Size()), N: hi - lo, DType: b.DType}
}

// Comm is one rank's end of a communicator. Every rank must issue the same collectives in the
// same order with the same lengths (as with MPI and NCCL); the in-process comm checks this and
// fails all ranks on a mismatch instead of hanging. A Comm is used from one goroutine at a time.
type Comm interface {
	// Rank is this end's rank in [0, Size()).
	Rank() int
	// Size is the number of ranks (the world size).
	Size() int
	// AllReduceSum replaces buf on every rank with the element-wise sum over ranks (F32).
	AllReduceSum(buf Buffer) error
	// ReduceScatterSum sums send (Size()·recv.Len() elements, F32) over ranks and leaves block
	// Rank() of the sum in recv.
	ReduceScatterSum(send, recv Buffer) error
	// AllGather concatenates every rank's send (equal lengths) in rank order into recv
	// (Size()·send.Len() elements). send may be this rank's own block of recv (in place).
	AllGather(send, recv Buffer) error
	// Broadcast copies root's buf into every other rank's buf. Host comms also take Raw buffers
	// (any DType, copied bit for bit).
	Broadcast(buf Buffer, root int) error
	// AllReduceFloat64 replaces vals (host memory, the same length on every rank) with their sums
	// over ranks.
	AllReduceFloat64(vals []float64) error
	// Close releases the rank's resources; a closed in-process comm fails the other ranks' pending
	// and later collectives rather than leaving them waiting.
	Close() error
}
