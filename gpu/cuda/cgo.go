//go:build cuda

package cuda

/*
#cgo CFLAGS: -I${SRCDIR}/csrc
#cgo LDFLAGS: -L${SRCDIR}/build -lt2cuda -lcublasLt -lcublas -lcudart -lstdc++ -lm
#include "t2cuda.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Error is a failed CUDA or cuBLAS call, with the call as written in csrc/ and its source line.
type Error struct {
	Code int    // cudaError_t, or 10000 + cublasStatus_t, or -1 for a rejected argument
	Call string // the failing expression
	File string
	Line int
	Msg  string // the library's description
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d: %s: %s (code %d)", e.File, e.Line, e.Call, e.Msg, e.Code)
}

func statusErr(s C.t2_status) error {
	if s.code == 0 {
		return nil
	}
	e := &Error{Code: int(s.code), Line: int(s.line)}
	if s.call != nil {
		e.Call = C.GoString(s.call)
	}
	if s.file != nil {
		e.File = C.GoString(s.file)
	}
	if s.msg != nil {
		e.Msg = C.GoString(s.msg)
	}
	return e
}

// seq runs a sequence of CUDA calls, stopping at the first failure and remembering where it was.
// Each call is a closure so nothing after a failure is launched.
// With a profiler (Backend.SetProfiling), each call is timed between CUDA events.
type seq struct {
	err  error
	prof *profiler
}

func (s *seq) do(what string, f func() C.t2_status) {
	if s.err != nil {
		return
	}
	var err error
	if s.prof != nil {
		err = s.prof.around(what, f)
	} else {
		err = statusErr(f())
	}
	if err != nil {
		s.err = fmt.Errorf("cuda: %s: %w", what, err)
	}
}

// dptr is a device pointer (memory from cudaMalloc, never Go memory).
type dptr = unsafe.Pointer

func ci(v int) C.int         { return C.int(v) }
func csz(v int) C.size_t     { return C.size_t(v) }
func f32p(p dptr) *C.float   { return (*C.float)(p) }
func i32p(p dptr) *C.int32_t { return (*C.int32_t)(p) }

// blockmaxBytes is the size of t2_tree_blockmax's output for n tokens: the per-64-key maxima and
// minima of the subtree ends and the Hopper kernels' launch orders.
func blockmaxBytes(n int) int { return int(C.t2_tree_blockmax_bytes(ci(n))) }

// off returns p advanced by n elements of size elem bytes.
func off(p dptr, n, elem int) dptr { return unsafe.Add(p, n*elem) }

func malloc(bytes int) (dptr, error) {
	var p unsafe.Pointer
	if err := statusErr(C.t2_malloc(&p, C.size_t(bytes))); err != nil {
		return nil, fmt.Errorf("cuda: allocate %d bytes: %w", bytes, err)
	}
	return p, nil
}

func free(p dptr) error { return statusErr(C.t2_free(p)) }

func h2dF32(dst dptr, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	return statusErr(C.t2_h2d(dst, unsafe.Pointer(&src[0]), C.size_t(4*len(src))))
}

func h2dI32(dst dptr, src []int32) error {
	if len(src) == 0 {
		return nil
	}
	return statusErr(C.t2_h2d(dst, unsafe.Pointer(&src[0]), C.size_t(4*len(src))))
}

func d2hF32(dst []float32, src dptr) error {
	if len(dst) == 0 {
		return nil
	}
	return statusErr(C.t2_d2h(unsafe.Pointer(&dst[0]), src, C.size_t(4*len(dst))))
}

func memset0(p dptr, bytes int) error { return statusErr(C.t2_memset(p, 0, C.size_t(bytes))) }

func syncDevice() error { return statusErr(C.t2_sync()) }

// DeviceInfo describes the GPU a backend runs on.
type DeviceInfo struct {
	Name       string
	SMs        int
	FreeBytes  int64
	TotalBytes int64
	// Hopper: the wgmma attention kernels (Options.Attention "hopper") run here: compute
	// capability 9.x and a kernel library built for sm_90a.
	Hopper bool
}

// Device reports the name, multiprocessor count, memory and Hopper kernel support of CUDA device
// ordinal dev.
func Device(dev int) (DeviceInfo, error) {
	runtime.LockOSThread() // the device selected below is per OS thread
	defer runtime.UnlockOSThread()
	var buf [256]C.char
	var sms C.int
	if err := statusErr(C.t2_device_name(C.int(dev), &buf[0], 256, &sms)); err != nil {
		return DeviceInfo{}, fmt.Errorf("cuda: device %d: %w", dev, err)
	}
	if err := statusErr(C.t2_set_device(C.int(dev))); err != nil {
		return DeviceInfo{}, fmt.Errorf("cuda: device %d: %w", dev, err)
	}
	var fr, tot C.size_t
	if err := statusErr(C.t2_mem_info(&fr, &tot)); err != nil {
		return DeviceInfo{}, fmt.Errorf("cuda: device %d: %w", dev, err)
	}
	hopper, err := hopperAvailable(dev)
	if err != nil {
		return DeviceInfo{}, fmt.Errorf("cuda: device %d: %w", dev, err)
	}
	return DeviceInfo{Name: C.GoString(&buf[0]), SMs: int(sms), FreeBytes: int64(fr), TotalBytes: int64(tot),
		Hopper: hopper}, nil
}

// DeviceCount is the number of CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies); 0
// when there is no device or no driver. Multi-GPU tests skip below the count they need.
func DeviceCount() (int, error) {
	var n C.int
	if err := statusErr(C.t2_device_count(&n)); err != nil {
		return 0, fmt.Errorf("cuda: device count: %w", err)
	}
	return int(n), nil
}
