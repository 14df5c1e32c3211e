package collective

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The cross-process communicator over host memory: the pure-Go backend's ranks in several
// processes (several hosts of a trainer, or a test). One process serves a hub (ServeHub); every
// rank, the hub's own process's included, dials it (DialHub). For each collective every rank
// sends its contribution to the hub, which waits for all of them, checks they agree (the same
// operation and lengths, as the in-process comm does), reduces in rank order 0, 1, …, N−1 — so the
// results equal NewLocal's bit for bit — and sends each rank its result. A star, not a ring: it
// is for CPU-sized models and CI, not for bandwidth. Messages are gob streams over one TCP
// connection per rank; a rank that disconnects or disagrees fails every rank's pending and later
// collectives rather than leaving them waiting.
//
//	rank → hub   tcpHello{Proto, Job, Rank, World}, then one tcpReq per collective
//	hub  → rank  tcpReply{Err} to the hello, then one tcpReply per collective

const tcpProto = "tau2rl-collective-tcp/1"

type tcpHello struct {
	Proto, Job  string
	Rank, World int
}

type tcpReq struct {
	Op          string
	Data        []float32
	Raw         []byte // broadcast-raw: the root's bytes
	Vals        []float64
	Root        int
	SendN, BufN int
}

type tcpReply struct {
	Err  string
	Data []float32
	Raw  []byte
	Vals []float64
}

type hubConn struct {
	conn net.Conn
	enc  *gob.Encoder
	dec  *gob.Decoder
}

// ServeHub serves the hub of a world-rank communicator of job on ln: it accepts the world ranks
// (strays — another job or world size, a bad or duplicate rank — are refused and do not count),
// then runs collectives until a rank leaves (a Close, at the end of a run or to abort) or fails,
// which ends every rank's connection. It closes ln once all ranks are in, and returns nil when
// the world ended by a rank closing, or the error that ended it. ctx bounds the wait for the
// ranks to connect.
func ServeHub(ctx context.Context, ln net.Listener, job string, world int) error {
	conns := make([]*hubConn, world)
	err := func() error {
		defer ln.Close()
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		for n := 0; n < world; {
			c, err := ln.Accept()
			if err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				return fmt.Errorf("collective: hub: %d of %d ranks connected: %w", n, world, err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			hc := &hubConn{conn: c, enc: gob.NewEncoder(c), dec: gob.NewDecoder(bufio.NewReader(c))}
			var h tcpHello
			if err := hc.dec.Decode(&h); err != nil {
				c.Close()
				continue
			}
			var refuse string
			switch {
			case h.Proto != tcpProto || h.Job != job || h.World != world:
				refuse = fmt.Sprintf("this hub is %s job %q of %d ranks, not %s %q of %d", tcpProto, job, world, h.Proto, h.Job, h.World)
			case h.Rank < 0 || h.Rank >= world || conns[h.Rank] != nil:
				refuse = fmt.Sprintf("rank %d outside [0,%d) or already connected", h.Rank, world)
			}
			if refuse != "" {
				hc.enc.Encode(tcpReply{Err: refuse})
				c.Close()
				continue
			}
			if err := hc.enc.Encode(tcpReply{}); err != nil {
				c.Close()
				continue
			}
			c.SetDeadline(time.Time{})
			conns[h.Rank] = hc
			n++
		}
		return nil
	}()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.conn.Close()
			}
		}
	}()
	if err != nil {
		return err
	}
	reqs := make([]tcpReq, world)
	for {
		// Read every rank's contribution concurrently (a rank's large write must not wait for
		// the hub to finish reading a lower rank).
		errs := make([]error, world)
		var wg sync.WaitGroup
		for r, c := range conns {
			wg.Go(func() {
				reqs[r] = tcpReq{}
				errs[r] = c.dec.Decode(&reqs[r])
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				// A rank left: the world ends; the others' connections close with it.
				return nil
			}
		}
		out, err := hubCompute(reqs)
		for r, c := range conns {
			rep := tcpReply{}
			if err != nil {
				rep.Err = err.Error()
			} else {
				rep = out[r]
			}
			if werr := c.enc.Encode(rep); werr != nil && err == nil {
				err = fmt.Errorf("collective: hub: send to rank %d: %w", r, werr)
			}
		}
		if err != nil {
			return err
		}
	}
}

// hubCompute checks the ranks' requests agree and computes each rank's reply.
func hubCompute(reqs []tcpReq) ([]tcpReply, error) {
	n := len(reqs)
	p := reqs[0]
	for r, q := range reqs {
		dataOK := len(q.Data) == len(p.Data) || p.Op == "broadcast" || p.Op == "broadcast-raw"
		if q.Op != p.Op || q.SendN != p.SendN || q.BufN != p.BufN || len(q.Vals) != len(p.Vals) || q.Root != p.Root || !dataOK {
			return nil, fmt.Errorf("collective: rank 0 called %s(send %d, buf %d, vals %d, root %d) while rank %d called %s(send %d, buf %d, vals %d, root %d)",
				p.Op, p.SendN, p.BufN, len(p.Vals), p.Root, r, q.Op, q.SendN, q.BufN, len(q.Vals), q.Root)
		}
	}
	out := make([]tcpReply, n)
	switch p.Op {
	case "all-reduce", "reduce-scatter":
		sum := make([]float32, len(p.Data))
		for _, q := range reqs { // rank order: deterministic, NewLocal's order
			for i, v := range q.Data {
				sum[i] += v
			}
		}
		for r := range out {
			if p.Op == "all-reduce" {
				out[r].Data = sum
			} else {
				if p.BufN*n != len(sum) {
					return nil, fmt.Errorf("collective: reduce-scatter of %d elements into %d-element shards over %d ranks", len(sum), p.BufN, n)
				}
				out[r].Data = sum[r*p.BufN : (r+1)*p.BufN]
			}
		}
	case "all-gather":
		all := make([]float32, 0, n*len(p.Data))
		for _, q := range reqs {
			all = append(all, q.Data...)
		}
		for r := range out {
			out[r].Data = all
		}
	case "broadcast":
		if p.Root < 0 || p.Root >= n || len(reqs[p.Root].Data) != p.BufN {
			return nil, fmt.Errorf("collective: broadcast root %d outside [0,%d) or without its %d elements", p.Root, n, p.BufN)
		}
		for r := range out {
			out[r].Data = reqs[p.Root].Data
		}
	case "broadcast-raw": // BufN is bytes
		if p.Root < 0 || p.Root >= n || len(reqs[p.Root].Raw) != p.BufN {
			return nil, fmt.Errorf("collective: broadcast root %d outside [0,%d) or without its %d bytes", p.Root, n, p.BufN)
		}
		for r := range out {
			out[r].Raw = reqs[p.Root].Raw
		}
	case "all-reduce-f64":
		sum := make([]float64, len(p.Vals))
		for _, q := range reqs {
			for i, v := range q.Vals {
				sum[i] += v
			}
		}
		for r := range out {
			out[r].Vals = sum
		}
	default:
		return nil, fmt.Errorf("collective: unknown operation %q", p.Op)
	}
	return out, nil
}

// tcpComm is one rank's end of a hub communicator.
type tcpComm struct {
	rank, world int
	conn        net.Conn
	enc         *gob.Encoder
	dec         *gob.Decoder
	mu          sync.Mutex
	broken      error
}

// DialHub joins the hub at addr as rank of a world-rank communicator of job, retrying connection
// failures every interval until ctx ends (the hub may start later). A refusal is returned at once.
func DialHub(ctx context.Context, addr, job string, rank, world int, interval time.Duration) (Comm, error) {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			c := &tcpComm{rank: rank, world: world, conn: conn, enc: gob.NewEncoder(conn), dec: gob.NewDecoder(bufio.NewReader(conn))}
			var rep tcpReply
			if err = c.enc.Encode(tcpHello{Proto: tcpProto, Job: job, Rank: rank, World: world}); err == nil {
				err = c.dec.Decode(&rep)
			}
			if err == nil {
				if rep.Err != "" {
					conn.Close()
					return nil, fmt.Errorf("collective: hub %s refused rank %d: %s", addr, rank, rep.Err)
				}
				conn.SetDeadline(time.Time{})
				return c, nil
			}
			conn.Close()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("collective: join the hub at %s as rank %d: %w (last error: %v)", addr, rank, ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

func (c *tcpComm) Rank() int { return c.rank }
func (c *tcpComm) Size() int { return c.world }

// Close leaves the world: the hub ends it, failing the other ranks' pending and later
// collectives. Safe to call from another goroutine than the one in a collective.
func (c *tcpComm) Close() error {
	c.conn.Close()
	return nil
}

func (c *tcpComm) call(q tcpReq) (tcpReply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return tcpReply{}, c.broken
	}
	var rep tcpReply
	err := c.enc.Encode(q)
	if err == nil {
		err = c.dec.Decode(&rep)
	}
	if err == nil && rep.Err != "" {
		err = errors.New(rep.Err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		err = fmt.Errorf("the world ended (a rank left or failed, or this one closed): %w", err)
	}
	if err != nil {
		c.broken = fmt.Errorf("collective: rank %d: %s: %w", c.rank, q.Op, err)
		c.conn.Close()
		return rep, c.broken
	}
	return rep, nil
}

func (c *tcpComm) AllReduceSum(buf Buffer) error {
	if err := host("all-reduce", buf); err != nil {
		return err
	}
	rep, err := c.call(tcpReq{Op: "all-reduce", Data: buf.Host, BufN: buf.N})
	if err == nil {
		err = c.copyResult(buf, rep.Data)
	}
	return err
}

func (c *tcpComm) ReduceScatterSum(send, recv Buffer) error {
	if err := host("reduce-scatter", send, recv); err != nil {
		return err
	}
	if send.N != c.world*recv.N {
		return fmt.Errorf("collective: reduce-scatter of %d elements into %d-element shards over %d ranks", send.N, recv.N, c.world)
	}
	rep, err := c.call(tcpReq{Op: "reduce-scatter", Data: send.Host, SendN: send.N, BufN: recv.N})
	if err == nil {
		err = c.copyResult(recv, rep.Data)
	}
	return err
}

func (c *tcpComm) AllGather(send, recv Buffer) error {
	if err := host("all-gather", send, recv); err != nil {
		return err
	}
	if recv.N != c.world*send.N {
		return fmt.Errorf("collective: all-gather of %d-element blocks into %d elements over %d ranks", send.N, recv.N, c.world)
	}
	rep, err := c.call(tcpReq{Op: "all-gather", Data: send.Host, SendN: send.N, BufN: recv.N})
	if err == nil {
		err = c.copyResult(recv, rep.Data)
	}
	return err
}

func (c *tcpComm) Broadcast(buf Buffer, root int) error {
	if buf.Raw != nil || (buf.N == 0 && buf.DType != F32) {
		return c.broadcastRaw(buf, root)
	}
	if err := host("broadcast", buf); err != nil {
		return err
	}
	if root < 0 || root >= c.world {
		return fmt.Errorf("collective: broadcast root %d outside [0,%d)", root, c.world)
	}
	q := tcpReq{Op: "broadcast", Root: root, BufN: buf.N}
	if c.rank == root {
		q.Data = buf.Host
	}
	rep, err := c.call(q)
	if err == nil {
		err = c.copyResult(buf, rep.Data)
	}
	return err
}

// broadcastRaw is Broadcast of a Raw buffer: the root's bytes travel as they are (the hub checks
// only that every rank asks for the same number of bytes from the same root).
func (c *tcpComm) broadcastRaw(buf Buffer, root int) error {
	if err := raw("broadcast", buf); err != nil {
		return err
	}
	if root < 0 || root >= c.world {
		return fmt.Errorf("collective: broadcast root %d outside [0,%d)", root, c.world)
	}
	q := tcpReq{Op: "broadcast-raw", Root: root, BufN: len(buf.Raw)}
	if c.rank == root {
		q.Raw = buf.Raw
	}
	rep, err := c.call(q)
	if err != nil {
		return err
	}
	if len(rep.Raw) != len(buf.Raw) {
		return fmt.Errorf("collective: rank %d: the hub returned %d bytes for %d", c.rank, len(rep.Raw), len(buf.Raw))
	}
	copy(buf.Raw, rep.Raw)
	return nil
}

func (c *tcpComm) AllReduceFloat64(vals []float64) error {
	rep, err := c.call(tcpReq{Op: "all-reduce-f64", Vals: vals})
	if err != nil {
		return err
	}
	if len(rep.Vals) != len(vals) {
		return fmt.Errorf("collective: rank %d: the hub returned %d values for %d", c.rank, len(rep.Vals), len(vals))
	}
	copy(vals, rep.Vals)
	return nil
}

func (c *tcpComm) copyResult(dst Buffer, data []float32) error {
	if len(data) != dst.N {
		return fmt.Errorf("collective: rank %d: the hub returned %d elements for %d", c.rank, len(data), dst.N)
	}
	copy(dst.Host, data)
	return nil
}
