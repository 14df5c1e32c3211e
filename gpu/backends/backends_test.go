package backends

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
)

// TestGet: a built backend is found, a backend this build leaves out says how to build one that
// has it (ErrNotBuilt), an unknown name lists the names a configuration may give.
func TestGet(t *testing.T) {
	_, cudaBuilt := Get("cuda")
	for _, c := range []struct {
		name, want string
		notBuilt   bool
	}{
		{"cpu", "", false},
		{"tpu", `backend "tpu" is not available in this binary (have: cpu`, false},
		{"cuda", "-tags cuda", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "cuda" && cudaBuilt == nil {
				t.Skip("a -tags cuda build has the backend")
			}
			b, err := Get(c.name)
			switch {
			case c.want == "" && (err != nil || b.Name != c.name || b.Load == nil || b.Decoder == nil):
				t.Fatalf("Get(%q) = %+v, %v", c.name, b.Name, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("Get(%q): %v, want an error with %q", c.name, err, c.want)
			case errors.Is(err, ErrNotBuilt) != c.notBuilt:
				t.Fatalf("Get(%q): %v, ErrNotBuilt %v", c.name, err, c.notBuilt)
			}
		})
	}
	if !slices.Contains(Names(), "cpu") || !IsKnown("cuda") || IsKnown("tpu") {
		t.Errorf("Names %v, Known %v", Names(), Known())
	}
	if cudaBuilt != nil && slices.Contains(Names(), "cuda") {
		t.Errorf("Names %v lists the missing cuda backend", Names())
	}
}

// TestRegisterTwicePanics: two files registering one name is a build mistake, caught at start.
func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a second registration of cpu did not panic")
		}
	}()
	Register("cpu", Backend{})
}

// TestCPUDecoderSizing: without kv.blocks the cpu decoder's cache holds kv.cpu_tokens tokens,
// rounded up to whole blocks; kv.blocks fixes it.
func TestCPUDecoderSizing(t *testing.T) {
	b, err := Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	w, err := gpu.NewRandomWeights(gpu.TinyConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kv   KV
		want int
	}{
		{KV{BlockSize: 16, CPUTokens: 100}, 7},
		{KV{BlockSize: 16, CPUTokens: 96}, 6},
		{KV{BlockSize: 16, Blocks: 3, CPUTokens: 100}, 3},
	} {
		d, err := b.Decoder(w, c.kv)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.KVSpec().NumBlocks; got != c.want {
			t.Errorf("%+v: %d blocks, want %d", c.kv, got, c.want)
		}
		d.Close()
	}
	if d, err := b.Decoder(w, KV{BlockSize: 3, CPUTokens: 100}); err == nil || d != nil {
		t.Errorf("block size 3: decoder %v, err %v; want an error and a nil interface", d, err)
	}
}

// TestCPUWorldAcrossHosts: the cpu backend's multi-host collectives — a TCP hub served by the
// leader (CommID) that every host's ranks join (HostComms) — sum over all ranks of two "hosts"
// of two ranks each; LocalComms does the same within one host.
func TestCPUWorldAcrossHosts(t *testing.T) {
	b, err := Get("cpu")
	if err != nil {
		t.Fatal(err)
	}
	leader := World{Ranks: 2, Size: 4, Job: "test", Addr: "127.0.0.1:1", Timeout: 20 * time.Second}
	id, err := b.CommID(leader)
	if err != nil {
		t.Fatal(err)
	}
	var comms [][]collective.Comm
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for h := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := leader
			w.FirstRank = h * w.Ranks
			cs, err := b.HostComms(w, id)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			comms = append(comms, cs)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	local, err := b.LocalComms(World{Ranks: 3, Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, world := range [][]collective.Comm{slices.Concat(comms...), local} {
		sums := make([][]float32, len(world))
		var wg sync.WaitGroup
		for i, c := range world {
			sums[i] = []float32{float32(c.Rank() + 1)}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.AllReduceSum(collective.HostBuffer(sums[i])); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		n := len(world)
		for i, s := range sums {
			if want := float32(n * (n + 1) / 2); s[0] != want {
				t.Errorf("world of %d, rank %d: sum %v, want %v", n, i, s[0], want)
			}
		}
		for _, c := range world {
			c.Close()
		}
	}
}
