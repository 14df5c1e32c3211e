package collective

import (
	"strings"
	"sync"
	"testing"
)

// worlds are the communicators every conformance test runs on.
var worlds = []struct {
	name string
	make func(t *testing.T, n int) []Comm
}{
	{"local", func(t *testing.T, n int) []Comm {
		comms, err := NewLocal(n)
		if err != nil {
			t.Fatal(err)
		}
		return comms
	}},
	{"tcp", tcpWorld},
}

// onRanks runs f on every rank of an n-rank communicator of the current world concurrently.
func onRanks(t *testing.T, n int, f func(c Comm) error) []error {
	t.Helper()
	comms := currentWorld(t, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() { errs[r] = f(c) })
	}
	wg.Wait()
	return errs
}

// currentWorld makes the communicator named by the subtest (see eachWorld).
var currentWorld func(t *testing.T, n int) []Comm

// eachWorld runs test once per communicator implementation.
func eachWorld(t *testing.T, test func(t *testing.T)) {
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			currentWorld = w.make
			test(t)
		})
	}
}

func TestLocalCollectives(t *testing.T) {
	eachWorld(t, func(t *testing.T) {
		for _, n := range []int{1, 2, 3, 4} {
			const shard = 5
			got := make([][]float32, n)
			errs := onRanks(t, n, func(c Comm) error {
				r := c.Rank()
				// rank r contributes (r+1)·(i+1) at element i.
				full := make([]float32, n*shard)
				for i := range full {
					full[i] = float32((r + 1) * (i + 1))
				}
				ar := append([]float32(nil), full...)
				if err := c.AllReduceSum(HostBuffer(ar)); err != nil {
					return err
				}
				rs := make([]float32, shard)
				if err := c.ReduceScatterSum(HostBuffer(full), HostBuffer(rs)); err != nil {
					return err
				}
				// In-place all-gather: own block of the reduced shards.
				ag := make([]float32, n*shard)
				copy(ag[r*shard:], rs)
				if err := c.AllGather(HostBuffer(ag[r*shard:(r+1)*shard]), HostBuffer(ag)); err != nil {
					return err
				}
				bc := []float32{float32(r), float32(r)}
				if err := c.Broadcast(HostBuffer(bc), n-1); err != nil {
					return err
				}
				f := []float64{float64(r), 1}
				if err := c.AllReduceFloat64(f); err != nil {
					return err
				}
				out := append(append(append(ar, ag...), bc...), float32(f[0]), float32(f[1]))
				got[r] = out
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("n=%d rank %d: %v", n, r, err)
				}
			}
			tri := float32(n * (n + 1) / 2) // Σ (r+1)
			for r := range n {
				g := got[r]
				for i := range n * shard {
					want := tri * float32(i+1)
					if g[i] != want || g[n*shard+i] != want {
						t.Fatalf("n=%d rank %d element %d: all-reduce %v, reduce-scatter+all-gather %v, want %v", n, r, i, g[i], g[n*shard+i], want)
					}
				}
				tail := g[2*n*shard:]
				if tail[0] != float32(n-1) || tail[1] != float32(n-1) || tail[2] != float32(n*(n-1)/2) || tail[3] != float32(n) {
					t.Fatalf("n=%d rank %d: broadcast/f64 tail %v", n, r, tail)
				}
			}
		}
	})
}

func TestLocalMismatchFailsEveryRank(t *testing.T) {
	eachWorld(t, func(t *testing.T) {
		errs := onRanks(t, 3, func(c Comm) error {
			buf := make([]float32, 4+c.Rank()%2) // rank 1 brings a different length
			return c.AllReduceSum(HostBuffer(buf))
		})
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "called all-reduce") {
				t.Fatalf("rank %d: err = %v, want a mismatch error", r, err)
			}
		}
	})
}

func TestLocalCloseReleasesWaiters(t *testing.T) {
	eachWorld(t, func(t *testing.T) {
		errs := onRanks(t, 3, func(c Comm) error {
			if c.Rank() == 2 {
				return c.Close() // leaves the others inside the collective
			}
			return c.AllReduceSum(HostBuffer(make([]float32, 2)))
		})
		for r := range 2 {
			if errs[r] == nil {
				t.Fatalf("rank %d: a collective with a closed rank succeeded", r)
			}
		}
	})
}

func TestLocalRejectsBadArguments(t *testing.T) {
	errs := onRanks(t, 2, func(c Comm) error {
		return c.ReduceScatterSum(HostBuffer(make([]float32, 5)), HostBuffer(make([]float32, 2)))
	})
	for _, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "reduce-scatter of 5") {
			t.Fatalf("err = %v", err)
		}
	}
	if _, err := NewLocal(0); err == nil {
		t.Fatal("NewLocal(0) succeeded")
	}
}

// TestBroadcastRawIsBitExact: a Raw bf16 broadcast carries every bit pattern, signalling-NaN
// halves included (which a float32 round trip through gob or a conversion could quieten), on
// both host communicators; slices of one buffer broadcast independently; a rank asking for
// another length fails every rank.
func TestBroadcastRawIsBitExact(t *testing.T) {
	eachWorld(t, func(t *testing.T) {
		const n, size = 3, 1 << 12
		src := make([]byte, 2*size)
		for i := range src {
			src[i] = byte(i*131 + i>>8)
		}
		copy(src[:4], []byte{0x01, 0x80, 0x81, 0x7f}) // 0x7f818001: a signalling NaN as float32
		got := make([][]byte, n)
		errs := onRanks(t, n, func(c Comm) error {
			buf := make([]byte, len(src))
			if c.Rank() == 1 {
				copy(buf, src)
			}
			b := HostBytes(buf, BF16)
			for _, s := range [][2]int{{0, 7}, {7, 7}, {7, size}} { // per tensor, an empty one among them
				if err := c.Broadcast(b.Slice(s[0], s[1]), 1); err != nil {
					return err
				}
			}
			got[c.Rank()] = buf
			return nil
		})
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("rank %d: %v", r, errs[r])
			}
			if string(got[r]) != string(src) {
				t.Fatalf("rank %d received other bytes", r)
			}
		}
		errs = onRanks(t, 2, func(c Comm) error {
			return c.Broadcast(HostBytes(make([]byte, 2*(4+c.Rank())), BF16), 0)
		})
		for r, err := range errs {
			if err == nil {
				t.Fatalf("rank %d: a broadcast of mismatched lengths succeeded", r)
			}
		}
	})
}
