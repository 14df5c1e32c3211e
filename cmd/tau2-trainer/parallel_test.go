package main

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
)

// closeCounter counts Close calls on a backend that openParallel built.
type closeCounter struct {
	gpu.Backend
	closed *atomic.Int32
}

func (c closeCounter) Close() error {
	c.closed.Add(1)
	return c.Backend.Close()
}

// TestOpenParallelRankFails: when one rank cannot be built (a GPU out of memory, say), openParallel
// returns that rank's error and closes the ranks that were built. A constructor that fails returns
// a typed nil (a nil *cpu.Backend or *cuda.Backend in a non-nil gpu.Backend); closing that
// panicked before.
func TestOpenParallelRankFails(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Backend = "cpu"
	cfg.Parallel.Ranks = 3
	var closed atomic.Int32
	build := func(r int) (gpu.Backend, error) {
		if r == 1 {
			var none *cpu.Backend
			return none, errors.New("out of memory")
		}
		be, err := cpu.NewRandom(gpu.TinyConfig(), 1)
		if err != nil {
			return nil, err
		}
		return closeCounter{be, &closed}, nil
	}
	g, err := openParallel(&cfg, nil, backends["cpu"], build, nil)
	if err == nil {
		g.Close()
		t.Fatal("openParallel succeeded with a rank that failed to build")
	}
	if !strings.Contains(err.Error(), "rank 1: out of memory") {
		t.Errorf("error %q does not name the failed rank and its cause", err)
	}
	if n := closed.Load(); n != 2 {
		t.Errorf("%d of the 2 built ranks closed", n)
	}
}
