package collective

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// NewLocal returns the n ends of an in-process communicator over host memory, one per goroutine
// (rank). Collectives block until every rank has entered them; reductions add contributions in
// rank order, so they are deterministic.
func NewLocal(n int) ([]Comm, error) {
	if n < 1 {
		return nil, fmt.Errorf("collective: world size %d must be ≥ 1", n)
	}
	h := &hub{n: n, posts: make([]post, n)}
	h.cond = sync.NewCond(&h.mu)
	out := make([]Comm, n)
	for r := range n {
		out[r] = &local{h: h, rank: r}
	}
	return out, nil
}

// post is what one rank brings to a collective.
type post struct {
	op        string
	send, buf Buffer
	vals      []float64
	root      int
}

// hub is the shared state of an in-process communicator: a reusable barrier and the posts of the
// collective in progress.
type hub struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	arrived int
	gen     uint64
	broken  error
	posts   []post
}

// wait is a cyclic barrier; it returns the hub's error if a rank closed or a mismatch was found.
func (h *hub) wait() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken != nil {
		return h.broken
	}
	gen := h.gen
	h.arrived++
	if h.arrived == h.n {
		h.arrived = 0
		h.gen++
		h.cond.Broadcast()
		return nil
	}
	for gen == h.gen && h.broken == nil {
		h.cond.Wait()
	}
	if gen == h.gen {
		return h.broken
	}
	return nil
}

func (h *hub) fail(err error) {
	h.mu.Lock()
	if h.broken == nil {
		h.broken = err
	}
	h.cond.Broadcast()
	h.mu.Unlock()
}

type local struct {
	h      *hub
	rank   int
	closed atomic.Bool // Close may come from another goroutine, to abort this rank's peers
}

var errClosed = errors.New("collective: a rank of the in-process communicator closed")

func (c *local) Rank() int { return c.rank }
func (c *local) Size() int { return c.h.n }

func (c *local) Close() error {
	if !c.closed.Swap(true) {
		c.h.fail(errClosed)
	}
	return nil
}

// run posts p, waits for every rank, checks the posts agree, lets compute read every post into
// this rank's private out, waits again so that no rank writes a buffer another rank still reads,
// and only then copies out into dst (this rank's own result buffer, which may alias its input).
func (c *local) run(p post, compute func(all []post) error, out []float32, dst Buffer) error {
	if c.closed.Load() {
		return errClosed
	}
	h := c.h
	h.posts[c.rank] = p
	if err := h.wait(); err != nil {
		return err
	}
	all := h.posts
	var err error
	for r, q := range all {
		if q.op != p.op || q.send.N != p.send.N || q.buf.N != p.buf.N || len(q.vals) != len(p.vals) || q.root != p.root {
			err = fmt.Errorf("collective: rank %d called %s(send %d, buf %d, vals %d, root %d) while rank %d called %s(send %d, buf %d, vals %d, root %d)",
				c.rank, p.op, p.send.N, p.buf.N, len(p.vals), p.root, r, q.op, q.send.N, q.buf.N, len(q.vals), q.root)
			break
		}
	}
	if err == nil {
		err = compute(all)
	}
	if err != nil {
		h.fail(err)
		return err
	}
	if err := h.wait(); err != nil {
		return err
	}
	copy(dst.Host, out)
	return nil
}

func host(op string, bs ...Buffer) error {
	for _, b := range bs {
		if b.N > 0 && (b.Host == nil || b.DType != F32 || len(b.Host) != b.N) {
			return fmt.Errorf("collective: %s: the in-process communicator takes host fp32 buffers", op)
		}
	}
	return nil
}

func (c *local) AllReduceSum(buf Buffer) error {
	if err := host("all-reduce", buf); err != nil {
		return err
	}
	sum := make([]float32, buf.N)
	return c.run(post{op: "all-reduce", buf: buf}, func(all []post) error {
		for _, q := range all { // rank order: deterministic
			for i, v := range q.buf.Host {
				sum[i] += v
			}
		}
		return nil
	}, sum, buf)
}

func (c *local) ReduceScatterSum(send, recv Buffer) error {
	if err := host("reduce-scatter", send, recv); err != nil {
		return err
	}
	if send.N != c.h.n*recv.N {
		return fmt.Errorf("collective: reduce-scatter of %d elements into %d-element shards over %d ranks", send.N, recv.N, c.h.n)
	}
	lo := c.rank * recv.N
	sum := make([]float32, recv.N)
	return c.run(post{op: "reduce-scatter", send: send, buf: recv}, func(all []post) error {
		for _, q := range all {
			for i, v := range q.send.Host[lo : lo+recv.N] {
				sum[i] += v
			}
		}
		return nil
	}, sum, recv)
}

func (c *local) AllGather(send, recv Buffer) error {
	if err := host("all-gather", send, recv); err != nil {
		return err
	}
	if recv.N != c.h.n*send.N {
		return fmt.Errorf("collective: all-gather of %d-element blocks into %d elements over %d ranks", send.N, recv.N, c.h.n)
	}
	out := make([]float32, recv.N)
	return c.run(post{op: "all-gather", send: send, buf: recv}, func(all []post) error {
		for r, q := range all {
			copy(out[r*send.N:], q.send.Host)
		}
		return nil
	}, out, recv)
}

func (c *local) Broadcast(buf Buffer, root int) error {
	if buf.Raw != nil || (buf.N == 0 && buf.DType != F32) {
		return c.broadcastRaw(buf, root)
	}
	if err := host("broadcast", buf); err != nil {
		return err
	}
	if root < 0 || root >= c.h.n {
		return fmt.Errorf("collective: broadcast root %d outside [0,%d)", root, c.h.n)
	}
	out := make([]float32, buf.N)
	return c.run(post{op: "broadcast", buf: buf, root: root}, func(all []post) error {
		copy(out, all[root].buf.Host)
		return nil
	}, out, buf)
}

// broadcastRaw is Broadcast of a Raw buffer (bytes of any DType).
func (c *local) broadcastRaw(buf Buffer, root int) error {
	if err := raw("broadcast", buf); err != nil {
		return err
	}
	if root < 0 || root >= c.h.n {
		return fmt.Errorf("collective: broadcast root %d outside [0,%d)", root, c.h.n)
	}
	out := make([]byte, len(buf.Raw))
	err := c.run(post{op: "broadcast-raw", buf: buf, root: root}, func(all []post) error {
		if all[root].buf.DType != buf.DType {
			return fmt.Errorf("collective: broadcast of %s from root %d into %s", all[root].buf.DType, root, buf.DType)
		}
		copy(out, all[root].buf.Raw)
		return nil
	}, nil, Buffer{})
	if err == nil {
		copy(buf.Raw, out) // after run's second barrier: no rank reads buf any more
	}
	return err
}

// raw checks a Raw buffer: bytes for exactly N elements.
func raw(op string, b Buffer) error {
	if len(b.Raw) != b.N*b.DType.Size() || b.Host != nil || b.Ptr != nil {
		return fmt.Errorf("collective: %s: a raw host buffer needs %d bytes for %d %s elements, has %d", op, b.N*b.DType.Size(), b.N, b.DType, len(b.Raw))
	}
	return nil
}

func (c *local) AllReduceFloat64(vals []float64) error {
	sum := make([]float64, len(vals))
	err := c.run(post{op: "all-reduce-f64", vals: vals}, func(all []post) error {
		for _, q := range all {
			for i, v := range q.vals {
				sum[i] += v
			}
		}
		return nil
	}, nil, Buffer{})
	if err == nil {
		copy(vals, sum)
	}
	return err
}
