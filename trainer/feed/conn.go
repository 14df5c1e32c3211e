package feed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"tau2rl/trainer/loss"
)

// Options tune both ends of the feed.
type Options struct {
	// MaxFrame bounds a received frame's payload. Default DefaultMaxFrame.
	MaxFrame int
	// AckTimeout is how long the leader waits for a follower's acknowledgement once its own part
	// of the request is done (the followers run the same update at the same time, so they finish
	// about together), and bounds every write. Default 10 minutes.
	AckTimeout time.Duration
	// HandshakeTimeout bounds one hello/welcome exchange. Default 10 s.
	HandshakeTimeout time.Duration
	// Settings describe what every host must share (the model, the local rank count): a
	// follower whose Settings differ from the leader's is refused with both in the error, rather
	// than training different weights or joining at the wrong ranks.
	Settings string
}

func (o Options) withDefaults() Options {
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 10 * time.Minute
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	return o
}

// Leader is host 0's end: one connection per follower.
type Leader struct {
	opt   Options
	peers []*peer // peers[h-1] is host h
	seq   uint64

	failed   chan struct{}
	failOnce sync.Once
	failErr  error
	closed   bool
}

type peer struct {
	host int
	conn net.Conn
	w    *bufio.Writer
	acks chan *Message
}

// Accept serves the feed on ln until each follower host 1 … hosts−1 of job has connected, and
// welcomes each with the checkpoint directory the job resumes from (dir, "" for a fresh start)
// and the collective's unique id. Connections that are not a follower of this job (another job,
// a bad host number, a host already connected, garbage) are refused and do not count. It closes
// ln on return; on an error (ctx ended first) every accepted connection is closed.
func Accept(ctx context.Context, ln net.Listener, job string, hosts int, dir string, commID []byte, opt Options) (*Leader, error) {
	defer ln.Close()
	opt = opt.withDefaults()
	l := &Leader{opt: opt, peers: make([]*peer, max(hosts-1, 0)), failed: make(chan struct{})}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for n := 0; n < hosts-1; {
		conn, err := ln.Accept()
		if err != nil {
			l.closeConns()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("feed: %d of %d follower hosts connected: %w", n, hosts-1, ctx.Err())
			}
			return nil, fmt.Errorf("feed: accept: %w", err)
		}
		p, err := l.handshake(conn, job, hosts, dir, commID)
		if err != nil {
			conn.Close()
			continue
		}
		l.peers[p.host-1] = p
		n++
	}
	for _, p := range l.peers {
		go l.readAcks(p)
	}
	return l, nil
}

func (l *Leader) handshake(conn net.Conn, job string, hosts int, dir string, commID []byte) (*peer, error) {
	conn.SetDeadline(time.Now().Add(l.opt.HandshakeTimeout))
	r := bufio.NewReader(conn)
	m, err := Read(r, 1<<16)
	if err != nil {
		return nil, err
	}
	refuse := func(format string, a ...any) (*peer, error) {
		err := fmt.Errorf(format, a...)
		Write(conn, &Message{Kind: Refused, Err: err.Error()})
		return nil, err
	}
	switch {
	case m.Kind != Hello || m.Proto != Proto:
		return refuse("expected a %s hello, got %s %q", Proto, m.Kind, m.Proto)
	case m.Job != job:
		return refuse("this is job %q, not %q", job, m.Job)
	case m.Host < 1 || m.Host >= hosts:
		return refuse("host %d outside [1,%d)", m.Host, hosts)
	case l.peers[m.Host-1] != nil:
		return refuse("host %d is already connected", m.Host)
	case m.Settings != l.opt.Settings:
		return refuse("host %d's settings %q differ from the leader's %q", m.Host, m.Settings, l.opt.Settings)
	}
	if err := Write(conn, &Message{Kind: Welcome, Dir: dir, CommID: commID}); err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	p := &peer{host: m.Host, conn: conn, w: bufio.NewWriter(conn), acks: make(chan *Message, 4)}
	// Acks are read by readAcks from the buffered reader that read the hello.
	p.conn = &bufferedConn{Conn: conn, r: r}
	return p, nil
}

// bufferedConn reads through the reader that read the handshake (which may hold bytes already).
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// readAcks delivers a follower's acknowledgements until its connection ends, which fails the
// leader (a follower never leaves on its own while the leader runs).
func (l *Leader) readAcks(p *peer) {
	for {
		m, err := Read(p.conn, l.opt.MaxFrame)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("connection closed by the follower")
			}
			l.fail(fmt.Errorf("feed: host %d: %w", p.host, err))
			return
		}
		if m.Kind != Ack {
			l.fail(fmt.Errorf("feed: host %d sent a %s message, want ack", p.host, m.Kind))
			return
		}
		if m.Err != "" {
			// A follower that failed stops (its ranks left the world): fail now, so a leader
			// waiting in a collective for its ranks is freed by its watcher, not only its Wait.
			l.fail(fmt.Errorf("feed: host %d: %s", p.host, m.Err))
			return
		}
		select {
		case p.acks <- m:
		case <-l.failed:
			return
		}
	}
}

func (l *Leader) fail(err error) {
	l.failOnce.Do(func() {
		l.failErr = err
		close(l.failed)
	})
}

// Failed is closed when a follower's connection failed or it sent garbage; Err says which.
func (l *Leader) Failed() <-chan struct{} { return l.failed }

// Err is the first follower failure, nil while there is none.
func (l *Leader) Err() error {
	select {
	case <-l.failed:
		return l.failErr
	default:
		return nil
	}
}

// Timeout is Options.AckTimeout: also the longest a leader waits inside one request's
// collectives for the followers' ranks before it gives up on them.
func (l *Leader) Timeout() time.Duration { return l.opt.AckTimeout }

// Hosts is the number of hosts, the leader included.
func (l *Leader) Hosts() int { return len(l.peers) + 1 }

// Send sends a request (Step, Checkpoint or Restore) to every follower and returns its sequence
// number for Wait.
func (l *Leader) Send(m Message) (uint64, error) {
	if err := l.Err(); err != nil {
		return 0, err
	}
	if err := m.Validate(); err != nil {
		return 0, fmt.Errorf("feed: %w", err)
	}
	l.seq++
	m.Seq = l.seq
	for _, p := range l.peers {
		p.conn.SetWriteDeadline(time.Now().Add(l.opt.AckTimeout))
		err := Write(p.w, &m)
		if err == nil {
			err = p.w.Flush()
		}
		if err != nil {
			err = fmt.Errorf("feed: host %d: %w", p.host, err)
			l.fail(err)
			return 0, err
		}
	}
	return m.Seq, nil
}

// Wait collects every follower's acknowledgement of request seq and returns them in host order.
// A follower that reports an error, fails, or does not answer within AckTimeout is an error
// naming the host.
func (l *Leader) Wait(seq uint64) ([]*Message, error) {
	out := make([]*Message, len(l.peers))
	timer := time.NewTimer(l.opt.AckTimeout)
	defer timer.Stop()
	for i, p := range l.peers {
		select {
		case m := <-p.acks:
			if m.Seq != seq {
				err := fmt.Errorf("feed: host %d acknowledged request %d, want %d", p.host, m.Seq, seq)
				l.fail(err)
				return nil, err
			}
			out[i] = m
		case <-l.failed:
			return nil, l.failErr
		case <-timer.C:
			err := fmt.Errorf("feed: host %d: no acknowledgement of request %d within %v", p.host, seq, l.opt.AckTimeout)
			l.fail(err)
			return nil, err
		}
	}
	return out, nil
}

// Close says goodbye to every follower (they exit with success) and closes the connections.
func (l *Leader) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	for _, p := range l.peers {
		p.conn.SetWriteDeadline(time.Now().Add(l.opt.HandshakeTimeout))
		if Write(p.w, &Message{Kind: Bye}) == nil {
			p.w.Flush()
		}
	}
	l.fail(errors.New("feed: closed"))
	l.closeConns()
	return nil
}

// Drop closes the connections without a goodbye: the leader failed, and the followers must fail
// too (so a supervisor restarts every host).
func (l *Leader) Drop() {
	if l.closed {
		return
	}
	l.closed = true
	l.fail(errors.New("feed: dropped"))
	l.closeConns()
}

func (l *Leader) closeConns() {
	for _, p := range l.peers {
		if p != nil {
			p.conn.Close()
		}
	}
}

// Follower is a follower host's end.
type Follower struct {
	opt  Options
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	// Welcome is the leader's reply to the hello: the resume directory and the comm id.
	Welcome *Message
}

// Dial connects to the leader of job at addr as host `host`, retrying connection failures every
// interval until ctx ends (the leader may start later). A refusal (wrong job, bad host number)
// is returned at once.
func Dial(ctx context.Context, addr, job string, host int, interval time.Duration, opt Options) (*Follower, error) {
	opt = opt.withDefaults()
	var d net.Dialer
	for {
		f, err, retry := dialOnce(ctx, &d, addr, job, host, opt)
		if err == nil || !retry {
			return f, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("feed: connect to the leader at %s: %w (last error: %v)", addr, ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

func dialOnce(ctx context.Context, d *net.Dialer, addr, job string, host int, opt Options) (*Follower, error, bool) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err, true
	}
	conn.SetDeadline(time.Now().Add(opt.HandshakeTimeout))
	if err := Write(conn, &Message{Kind: Hello, Proto: Proto, Job: job, Host: host, Settings: opt.Settings}); err != nil {
		conn.Close()
		return nil, err, true
	}
	r := bufio.NewReader(conn)
	m, err := Read(r, opt.MaxFrame)
	if err != nil {
		conn.Close()
		return nil, err, !errors.Is(err, ErrFrame)
	}
	switch m.Kind {
	case Welcome:
	case Refused:
		conn.Close()
		return nil, fmt.Errorf("feed: the leader at %s refused host %d: %s", addr, host, m.Err), false
	default:
		conn.Close()
		return nil, fmt.Errorf("feed: the leader at %s answered the hello with %s", addr, m.Kind), false
	}
	conn.SetDeadline(time.Time{})
	return &Follower{opt: opt, conn: conn, r: r, w: bufio.NewWriter(conn), Welcome: m}, nil, false
}

// Timeout is Options.AckTimeout.
func (f *Follower) Timeout() time.Duration { return f.opt.AckTimeout }

// ErrBye is Recv's error when the leader shut down cleanly.
var ErrBye = errors.New("feed: the leader shut down")

// Recv waits for the leader's next request (no deadline: the leader may wait long for data).
// It returns ErrBye after a clean shutdown; a connection that ends without one is an error.
func (f *Follower) Recv() (*Message, error) {
	m, err := Read(f.r, f.opt.MaxFrame)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("feed: the leader closed the connection without a goodbye (it failed)")
		}
		return nil, fmt.Errorf("feed: receive: %w", err)
	}
	switch m.Kind {
	case Bye:
		return nil, ErrBye
	case Step, Checkpoint, Restore:
		return m, nil
	}
	return nil, fmt.Errorf("feed: the leader sent a %s message, want a request", m.Kind)
}

// Ack answers request seq: the local ranks' statistics (steps) and the error, if any.
func (f *Follower) Ack(seq uint64, stats loss.Stats, err error) error {
	m := &Message{Kind: Ack, Seq: seq, Stats: stats}
	if err != nil {
		m.Err = err.Error()
		if m.Err == "" {
			m.Err = "error"
		}
	}
	f.conn.SetWriteDeadline(time.Now().Add(f.opt.AckTimeout))
	if err := Write(f.w, m); err != nil {
		return err
	}
	return f.w.Flush()
}

// Close closes the connection (the leader sees the follower gone).
func (f *Follower) Close() error { return f.conn.Close() }
