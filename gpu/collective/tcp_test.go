package collective

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// tcpWorld is an n-rank hub communicator over loopback TCP (the hub in a goroutine).
func tcpWorld(t *testing.T, n int) []Comm {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	hub := make(chan error, 1)
	go func() { hub <- ServeHub(ctx, ln, "job", n) }()
	comms := make([]Comm, n)
	for r := range n {
		if comms[r], err = DialHub(ctx, ln.Addr().String(), "job", r, n, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
		select {
		case err := <-hub:
			if err != nil && !strings.Contains(err.Error(), "called") {
				t.Errorf("hub: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the hub did not end after every rank closed")
		}
	})
	return comms
}

// TestTCPEqualsLocal: the same contributions give bit-for-bit the in-process comm's results
// (reductions in rank order on both).
func TestTCPEqualsLocal(t *testing.T) {
	const n, size = 3, 1000
	run := func(comms []Comm) [][]float32 {
		out := make([][]float32, n)
		var wg sync.WaitGroup
		for r, c := range comms {
			wg.Go(func() {
				buf := make([]float32, size)
				for i := range buf {
					buf[i] = 1 / float32(1+i+r*7) // sums that round differently in another order
				}
				if err := c.AllReduceSum(HostBuffer(buf)); err != nil {
					t.Error(err)
				}
				out[r] = buf
			})
		}
		wg.Wait()
		return out
	}
	local, _ := NewLocal(n)
	a, b := run(local), run(tcpWorld(t, n))
	for r := range n {
		for i := range size {
			if a[r][i] != b[r][i] {
				t.Fatalf("rank %d element %d: local %v, tcp %v", r, i, a[r][i], b[r][i])
			}
		}
	}
}

func TestHubRefusesStrays(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hub := make(chan error, 1)
	go func() { hub <- ServeHub(ctx, ln, "job", 2) }()
	for _, c := range []struct {
		job         string
		rank, world int
		want        string
	}{
		{"other", 0, 2, `job "job" of 2 ranks`},
		{"job", 0, 3, "of 2 ranks"},
		{"job", 2, 2, "outside [0,2)"},
	} {
		if _, err := DialHub(ctx, addr, c.job, c.rank, c.world, time.Millisecond); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	r0, err := DialHub(ctx, addr, "job", 0, 2, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DialHub(ctx, addr, "job", 0, 2, time.Millisecond); err == nil || !strings.Contains(err.Error(), "already connected") {
		t.Fatalf("duplicate rank: %v", err)
	}
	r1, err := DialHub(ctx, addr, "job", 1, 2, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	r0.Close()
	r1.Close()
	if err := <-hub; err != nil {
		t.Fatal(err)
	}
}
