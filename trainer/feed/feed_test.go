package feed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/trainer/loss"
	"tau2rl/trainer/prefixtree"
)

// testStep is a small valid step: two sequences sharing a prefix, packed.
func testStep(t testing.TB) *StepData {
	seqs := []prefixtree.Sequence{
		{Tokens: []int32{1, 2, 3, 4}, Loss: []bool{false, false, true, true}},
		{Tokens: []int32{1, 2, 5}, Loss: []bool{false, false, true}},
	}
	p, err := prefixtree.Pack(seqs, prefixtree.Config{MaxTokensPerMB: 16})
	if err != nil {
		t.Fatal(err)
	}
	return &StepData{
		Actor:   Actor{Optimizer: gpu.DefaultOptimizer(), Loss: loss.DefaultConfig(), PPONMinibatches: 1, RecomputeLogprob: true},
		Packing: p,
		Seqs: []loss.Seq{
			{Offset: 2, Adv: []float32{0.5, 0.5}, Behav: []float32{-1, -2}},
			{Offset: 2, Adv: []float32{-0.5}, Behav: []float32{-0.3}},
		},
	}
}

func frame(t testing.TB, m *Message) []byte {
	var b bytes.Buffer
	if err := Write(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestFrameRoundTrip(t *testing.T) {
	msgs := []*Message{
		{Kind: Hello, Proto: Proto, Job: "j", Host: 1, Settings: "model=x"},
		{Kind: Welcome, Dir: "/ckpt/v3", CommID: []byte{1, 2, 3}},
		{Kind: Step, Seq: 7, Step: testStep(t)},
		{Kind: Checkpoint, Seq: 8, Dir: "/ckpt/.tmp-v4"},
		{Kind: Restore, Seq: 1, Dir: "/ckpt/v3"},
		{Kind: Ack, Seq: 7, Stats: loss.Stats{Tokens: 3, Loss: 0.25, BehavWMax: 1.5}},
		{Kind: Ack, Seq: 8, Err: "disk full"},
		{Kind: Refused, Err: "wrong job"},
		{Kind: Bye},
	}
	for _, m := range msgs {
		got, err := Read(bytes.NewReader(frame(t, m)), 0)
		if err != nil {
			t.Fatalf("%s: %v", m.Kind, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%s: got %+v, want %+v", m.Kind, got, m)
		}
	}
}

func TestReadRejects(t *testing.T) {
	good := frame(t, &Message{Kind: Step, Seq: 1, Step: testStep(t)})
	bad := func(f func(s *StepData)) []byte {
		s := testStep(t)
		f(s)
		var b bytes.Buffer
		// Write does not validate (the leader's Send does), so invalid content reaches Read.
		if err := Write(&b, &Message{Kind: Step, Seq: 1, Step: s}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	oversize := bytes.Clone(good)
	binary.BigEndian.PutUint32(oversize[4:8], 1<<20)
	trailing := bytes.Clone(good)
	binary.BigEndian.PutUint32(trailing[4:8], uint32(len(good)-8+3))
	trailing = append(trailing, 0, 0, 0)
	for _, tc := range []struct {
		name  string
		in    []byte
		max   int
		want  string
		frame bool
	}{
		{"bad magic", append([]byte("XXXX"), good[4:]...), 0, "magic", true},
		{"over the bound", oversize, 1000, "over the bound", true},
		{"truncated payload", good[:len(good)-5], 0, "inside a", false},
		{"truncated header", good[:5], 0, "frame header", false},
		{"trailing bytes", trailing, 0, "after the message", true},
		{"garbage payload", append(append([]byte("T2FD"), 0, 0, 0, 4), 1, 2, 3, 4), 0, "malformed", true},
		{"unknown kind", frame(t, &Message{Kind: 99}), 0, "unknown message kind", true},
		{"step without data", frame(t, &Message{Kind: Step}), 0, "without data", true},
		{"checkpoint without dir", frame(t, &Message{Kind: Checkpoint}), 0, "without a directory", true},
		{"hello from host 0", frame(t, &Message{Kind: Hello, Host: 0}), 0, "hosts ≥ 1", true},
		{"no minibatches", bad(func(s *StepData) { s.Actor.PPONMinibatches = 0 }), 0, "ppo_n_minibatches", true},
		{"bad lr", bad(func(s *StepData) { s.Actor.Optimizer.LR = -1 }), 0, "step:", true},
		{"bad clip", bad(func(s *StepData) { s.Actor.Loss.EpsClip = 2 }), 0, "eps_clip", true},
		{"broken tree", bad(func(s *StepData) { s.Packing.MicroBatches[0].Parent[1] = 5 }), 0, "micro-batch 0", true},
		{"sequence out of range", bad(func(s *StepData) { s.Seqs = s.Seqs[:1] }), 0, "refers to sequence 1 of 1", true},
		{"empty micro-batch", bad(func(s *StepData) { s.Packing.MicroBatches[0] = &prefixtree.MicroBatch{} }), 0, "empty", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.in), tc.max)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, ErrFrame) != tc.frame {
				t.Fatalf("errors.Is(%v, ErrFrame) = %v", err, !tc.frame)
			}
		})
	}
}

// FuzzRead: a frame from the network never panics the decoder, and what it accepts is valid and
// re-encodes to a frame that decodes the same.
func FuzzRead(f *testing.F) {
	f.Add(frame(f, &Message{Kind: Step, Seq: 3, Step: testStep(f)}))
	f.Add(frame(f, &Message{Kind: Hello, Proto: Proto, Job: "j", Host: 2}))
	f.Add(frame(f, &Message{Kind: Ack, Seq: 1, Stats: loss.Stats{Tokens: 1}}))
	f.Add([]byte("T2FD\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Read(bytes.NewReader(in), 1<<20)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted an invalid message: %v", err)
		}
		again, err := Read(bytes.NewReader(frame(t, m)), 1<<20)
		if err != nil {
			t.Fatalf("re-encoded frame rejected: %v", err)
		}
		if !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip changed the message")
		}
	})
}

// pair starts a leader for hosts hosts and connects followers 1 … hosts−1.
func pair(t *testing.T, hosts int, opt Options) (*Leader, []*Follower) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		l   *Leader
		err error
	}
	done := make(chan res, 1)
	go func() {
		l, err := Accept(ctx, ln, "job", hosts, "/ckpt/v2", []byte("id"), opt)
		done <- res{l, err}
	}()
	fs := make([]*Follower, hosts-1)
	for h := 1; h < hosts; h++ {
		f, err := Dial(ctx, ln.Addr().String(), "job", h, 10*time.Millisecond, opt)
		if err != nil {
			t.Fatal(err)
		}
		if f.Welcome.Dir != "/ckpt/v2" || string(f.Welcome.CommID) != "id" {
			t.Fatalf("welcome %+v", f.Welcome)
		}
		fs[h-1] = f
		t.Cleanup(func() { f.Close() })
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.l.Close() })
	return r.l, fs
}

func TestRequestsAndAcks(t *testing.T) {
	l, fs := pair(t, 3, Options{})
	seq, err := l.Send(Message{Kind: Step, Step: testStep(t)})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		m, err := f.Recv()
		if err != nil || m.Kind != Step || m.Seq != seq || !reflect.DeepEqual(m.Step, testStep(t)) {
			t.Fatalf("host %d received %+v, %v", i+1, m, err)
		}
		if err := f.Ack(m.Seq, loss.Stats{Tokens: int64(i + 1)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	acks, err := l.Wait(seq)
	if err != nil || len(acks) != 2 || acks[0].Stats.Tokens != 1 || acks[1].Stats.Tokens != 2 {
		t.Fatalf("acks %+v, %v", acks, err)
	}
	// A follower's error is the leader's, naming the host.
	seq, _ = l.Send(Message{Kind: Checkpoint, Dir: "/ckpt/.tmp"})
	for i, f := range fs {
		m, _ := f.Recv()
		var err error
		if i == 1 {
			err = errors.New("disk full")
		}
		f.Ack(m.Seq, loss.Stats{}, err)
	}
	if _, err := l.Wait(seq); err == nil || err.Error() != "feed: host 2: disk full" {
		t.Fatalf("wait: %v", err)
	}
	// A clean shutdown ends every follower with ErrBye.
	l.Close()
	for _, f := range fs {
		if _, err := f.Recv(); !errors.Is(err, ErrBye) {
			t.Fatalf("after close: %v", err)
		}
	}
}

func TestFollowerGoneFailsTheLeader(t *testing.T) {
	l, fs := pair(t, 3, Options{})
	fs[1].Close()
	select {
	case <-l.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("the leader did not notice host 2 leaving")
	}
	if err := l.Err(); err == nil || !strings.Contains(err.Error(), "host 2") {
		t.Fatalf("err %v", err)
	}
	if _, err := l.Send(Message{Kind: Restore, Dir: "/x"}); err == nil || !strings.Contains(err.Error(), "host 2") {
		t.Fatalf("send after failure: %v", err)
	}
}

func TestAckTimeout(t *testing.T) {
	l, fs := pair(t, 2, Options{AckTimeout: 100 * time.Millisecond})
	seq, err := l.Send(Message{Kind: Restore, Dir: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs[0].Recv(); err != nil {
		t.Fatal(err)
	}
	_, err = l.Wait(seq) // the follower never answers
	if err == nil || !strings.Contains(err.Error(), "host 1: no acknowledgement") {
		t.Fatalf("wait: %v", err)
	}
}

func TestLeaderGoneWithoutGoodbye(t *testing.T) {
	l, fs := pair(t, 2, Options{})
	l.Drop()
	if _, err := fs[0].Recv(); err == nil || errors.Is(err, ErrBye) {
		t.Fatalf("recv: %v", err)
	}
}

func TestHandshakeRefusals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan *Leader, 1)
	go func() {
		l, err := Accept(ctx, ln, "job", 2, "", nil, Options{Settings: "model=A"})
		if err != nil {
			t.Error(err)
		}
		done <- l
	}()
	// Strays are refused at once and do not count.
	if _, err := Dial(ctx, addr, "other", 1, time.Millisecond, Options{}); err == nil || !strings.Contains(err.Error(), `this is job "job"`) {
		t.Fatalf("wrong job: %v", err)
	}
	if _, err := Dial(ctx, addr, "job", 2, time.Millisecond, Options{}); err == nil || !strings.Contains(err.Error(), "outside [1,2)") {
		t.Fatalf("bad host: %v", err)
	}
	if _, err := Dial(ctx, addr, "job", 1, time.Millisecond, Options{Settings: "model=B"}); err == nil || !strings.Contains(err.Error(), `settings "model=B" differ from the leader's "model=A"`) {
		t.Fatalf("other settings: %v", err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	c.Close()
	f, err := Dial(ctx, addr, "job", 1, time.Millisecond, Options{Settings: "model=A"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := <-done
	if l == nil {
		t.Fatal("no leader")
	}
	l.Close()
}

func TestDialRetriesUntilTheLeaderListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens yet
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		f, err := Dial(ctx, addr, "job", 1, 20*time.Millisecond, Options{})
		if err == nil {
			f.Close()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port reused meanwhile: %v", err)
	}
	l, err := Accept(ctx, ln, "job", 2, "", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// A leader that never comes ends with ctx.
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := Dial(short, "127.0.0.1:1", "job", 1, 10*time.Millisecond, Options{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no leader: %v", err)
	}
}
