package topology

import (
	"errors"
	"strings"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/backends"
	"tau2rl/gpu/cpu"
)

// TestOpenParallelRankFails: when one rank cannot be built (a GPU out of memory, say), the trainer
// reports that rank's error. The failed constructor's typed nil (a nil *cpu.Backend in a non-nil
// gpu.Backend) used to be closed with the built ranks, which panicked.
func TestOpenParallelRankFails(t *testing.T) {
	s := Settings{Backend: "cpu", Parallel: Parallel{Ranks: 3}}
	build := func(r int) (gpu.Backend, error) {
		if r == 1 {
			var none *cpu.Backend
			return none, errors.New("out of memory")
		}
		return cpu.NewRandom(gpu.TinyConfig(), 1)
	}
	b, err := backends.Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.openParallel(b, build, nil)
	if err == nil {
		g.Close()
		t.Fatal("openParallel succeeded with a rank that failed to build")
	}
	if !strings.Contains(err.Error(), "rank 1: out of memory") {
		t.Errorf("error %q does not name the failed rank and its cause", err)
	}
}
