package dp

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
)

// closeCounter counts the Close calls of a backend BuildRanks built.
type closeCounter struct {
	gpu.Backend
	rank   int
	closed *atomic.Int32
}

func (c closeCounter) Close() error {
	c.closed.Add(1)
	return c.Backend.Close()
}

func TestBuildRanks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       int
		fail    map[int]bool // ranks whose build fails, returning a typed nil
		wantErr string
	}{
		{name: "all built", n: 3},
		{name: "one rank fails", n: 3, fail: map[int]bool{1: true}, wantErr: "rank 1: out of memory"},
		{name: "two ranks fail", n: 4, fail: map[int]bool{0: true, 3: true}, wantErr: "rank 0: out of memory\nrank 3: out of memory"},
		{name: "no ranks", n: 0, wantErr: "dp: 0 ranks to build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var closed atomic.Int32
			bes, err := BuildRanks(tc.n, func(r int) (gpu.Backend, error) {
				if tc.fail[r] {
					var none *cpu.Backend // what a failed constructor returns
					return none, errors.New("out of memory")
				}
				be, err := cpu.NewRandom(gpu.TinyConfig(), 1)
				if err != nil {
					return nil, err
				}
				return closeCounter{be, r, &closed}, nil
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if built := tc.n - len(tc.fail); int(closed.Load()) != built {
					t.Errorf("%d of the %d built ranks closed", closed.Load(), built)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for r, be := range bes {
				if got := be.(closeCounter).rank; got != r {
					t.Errorf("position %d holds rank %d", r, got)
				}
				be.Close()
			}
		})
	}
}
