package collective

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRendezvous: host 0 serves the id to hosts 1 and 2; a wrong job and a bad host number are
// refused at once and do not count as served.
func TestRendezvous(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	id := bytes.Repeat([]byte{0xab, 0x01}, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- ServeID(ctx, ln, "job-a", 3, id) }()
	if _, err := FetchID(ctx, addr, "job-b", 1, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), `not "job-b"`) {
		t.Fatalf("wrong job: %v", err)
	}
	if _, err := FetchID(ctx, addr, "job-a", 3, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "outside [1,3)") {
		t.Fatalf("bad host: %v", err)
	}
	var wg sync.WaitGroup
	got := make([][]byte, 3)
	errs := make([]error, 3)
	for h := 1; h < 3; h++ {
		wg.Go(func() { got[h], errs[h] = FetchID(ctx, addr, "job-a", h, 10*time.Millisecond) })
	}
	wg.Wait()
	for h := 1; h < 3; h++ {
		if errs[h] != nil || !bytes.Equal(got[h], id) {
			t.Fatalf("host %d: %x, %v", h, got[h], errs[h])
		}
	}
	if err := <-served; err != nil {
		t.Fatalf("server: %v", err)
	}
}

// TestRendezvousWaitsForHost0: a follower started before host 0 retries until it is up.
func TestRendezvousWaitsForHost0(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens yet
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := []byte("0123456789")
	done := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		ln2, err := net.Listen("tcp", addr)
		if err != nil {
			done <- err
			return
		}
		done <- ServeID(ctx, ln2, "j", 2, id)
	}()
	got, err := FetchID(ctx, addr, "j", 1, 10*time.Millisecond)
	if err != nil || !bytes.Equal(got, id) {
		t.Fatalf("%q, %v", got, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := FetchID(short, addr, "j", 1, 10*time.Millisecond); err == nil {
		t.Fatal("fetch with nobody serving succeeded")
	}
}
