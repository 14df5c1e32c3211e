//go:build cuda

package cuda

/*
#include "t2cuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"unsafe"
)

// OpTime is the device time of one kind of operation summed over a profiled run: every layer's
// "qkv_proj" adds to one OpTime, named without the layer number.
type OpTime struct {
	Op    string  // the operation as the backend names it in errors, without "layer N "
	Calls int     // launches summed
	MS    float64 // device milliseconds between the events recorded around the launches
}

// profiler times every operation a seq launches between two CUDA events on the default stream.
// Events come from a pool that grows to the most operations one Forward/Backward/Step launches;
// their times are read (and the pool reused) after the host has synchronized anyway, so profiling
// adds an event record per launch and no extra synchronization.
type profiler struct {
	pool    []dptr
	used    int
	pending []pendingOp
	totals  map[string]*OpTime
}

type pendingOp struct {
	op          string
	start, stop dptr
}

var layerPrefix = regexp.MustCompile(`^layer \d+ `)

func (p *profiler) event() (dptr, error) {
	if p.used == len(p.pool) {
		var ev dptr
		if err := statusErr(C.t2_event_create(&ev)); err != nil {
			return nil, err
		}
		p.pool = append(p.pool, ev)
	}
	p.used++
	return p.pool[p.used-1], nil
}

// around records an event before and after f; an event failure is returned as f's failure would be.
func (p *profiler) around(what string, f func() C.t2_status) error {
	start, err := p.event()
	if err == nil {
		err = statusErr(C.t2_event_record(start))
	}
	if err != nil {
		return fmt.Errorf("profile event: %w", err)
	}
	if err := statusErr(f()); err != nil {
		return err
	}
	stop, err := p.event()
	if err == nil {
		err = statusErr(C.t2_event_record(stop))
	}
	if err != nil {
		return fmt.Errorf("profile event: %w", err)
	}
	p.pending = append(p.pending, pendingOp{layerPrefix.ReplaceAllString(what, ""), start, stop})
	return nil
}

// collect adds the pending operations' times to the totals and frees the pool for reuse.
func (p *profiler) collect() error {
	defer func() { p.pending, p.used = p.pending[:0], 0 }()
	for _, op := range p.pending {
		var ms C.float
		if err := statusErr(C.t2_event_elapsed(op.start, op.stop, &ms)); err != nil {
			return fmt.Errorf("cuda: profile %s: %w", op.op, err)
		}
		t := p.totals[op.op]
		if t == nil {
			t = &OpTime{Op: op.op}
			p.totals[op.op] = t
		}
		t.Calls++
		t.MS += float64(ms)
	}
	return nil
}

func (p *profiler) close() error {
	var errs []error
	for _, ev := range p.pool {
		if err := statusErr(C.t2_event_destroy(ev)); err != nil {
			errs = append(errs, err)
		}
	}
	p.pool = nil
	return errors.Join(errs...)
}

// SetProfiling turns the per-operation profiler on or off. While on, every kernel launch and GEMM
// of Forward, Backward and Step is bracketed by CUDA events (a few microseconds each) and its
// device time added to Profile's totals; turning it on clears earlier totals.
func (b *Backend) SetProfiling(on bool) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	if b.prof != nil {
		if err := b.prof.close(); err != nil {
			return fmt.Errorf("cuda: profiler: %w", err)
		}
		b.prof = nil
	}
	if on {
		b.prof = &profiler{totals: map[string]*OpTime{}}
	}
	return nil
}

// GEMMPlans describes the GEMM algorithms Options.GEMM "tuned" has picked so far, one line per
// shape: its calls, the pick's time and rate against cuBLASLt's first candidate's, and the
// algorithm's configuration. It is empty with "cublas".
func (b *Backend) GEMMPlans() (string, error) {
	if err := b.enter(); err != nil {
		return "", err
	}
	defer b.leave()
	buf := make([]byte, 1<<16)
	var n C.int
	if err := statusErr(C.t2_gemm_report(b.ctx, (*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), &n)); err != nil {
		return "", fmt.Errorf("cuda: gemm report: %w", err)
	}
	return string(buf[:n]), nil
}

// Profile returns the profiled device time per operation, largest first (nil when profiling is
// off).
func (b *Backend) Profile() []OpTime {
	return b.prof.sorted()
}

// sorted returns the totals, largest first (nil for a nil profiler).
func (p *profiler) sorted() []OpTime {
	if p == nil {
		return nil
	}
	out := make([]OpTime, 0, len(p.totals))
	for _, t := range p.totals {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].MS != out[j].MS {
			return out[i].MS > out[j].MS
		}
		return out[i].Op < out[j].Op
	})
	return out
}

// newSeq starts a sequence of launches, profiled when profiling is on.
func (b *Backend) newSeq() seq { return seq{prof: b.prof} }

// finish synchronizes the device after a sequence and collects its profile.
func (s *seq) finish(what string) error {
	if s.err != nil {
		if s.prof != nil {
			s.prof.pending, s.prof.used = s.prof.pending[:0], 0
		}
		return s.err
	}
	if err := syncDevice(); err != nil {
		return fmt.Errorf("cuda: %s: %w", what, err)
	}
	if s.prof != nil {
		return s.prof.collect()
	}
	return nil
}
