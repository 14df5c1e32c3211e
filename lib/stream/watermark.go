package stream

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
)

// Partition names one partition of a topic.
type Partition struct {
	Topic     string
	Partition int
}

// Offset is a commit point: Next is the offset to resume Partition from (the first message not
// done). The JSON form is what the trainer keeps in its checkpoint state.
type Offset struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Next      int64  `json:"next"`
}

// Redelivery says what Watermark.Add does with a message at or below an offset it already
// tracks on that partition: after a rebalance, or a restart of the fetch, Kafka redelivers from
// the committed offset.
type Redelivery int

const (
	// RedeliveryTrack tracks it like any other, behind the ones already queued; the commit point
	// never moves back. For consumers that de-duplicate what they process (the archiver drops
	// rows whose id it has archived), so the copy finishes at once while the original holds.
	RedeliveryTrack Redelivery = iota
	// RedeliveryIgnore does not track it (Add returns nil): the original entry alone holds the
	// watermark. For consumers that keep the original's work in memory (the trainer's groups).
	RedeliveryIgnore
	// RedeliveryRestart starts the partition over from the redelivered offset: tickets issued
	// before release nothing, so work still running from before finishes but commits nothing
	// (the producers' rollout requests, each redelivered request runs again).
	RedeliveryRestart
)

// Watermark turns out-of-order completion into commit points. Kafka keeps one offset per
// partition meaning "everything before this is done", but work finishes out of order (episodes
// of different lengths, files finalized at different times, groups trained in different steps).
// So each partition keeps its fetched messages in fetch order, each with a count of holds (work
// not yet durable), and its commit point only moves past a message once it and every message
// before it have no holds left. Committing past a message still held would lose it on a crash;
// messages done above a held one are redelivered after a restart, which each consumer handles
// (Redelivery).
//
// This is the one commit rule of the pipeline: the producers (a request is done once its group
// is published), the archiver (a message is done once every file holding its rows is durable)
// and the trainer (a trajectory is done once discarded, or trained in a step whose checkpoint is
// durable) all commit through it. A Watermark is safe for concurrent use.
type Watermark struct {
	mu         sync.Mutex
	redelivery Redelivery
	parts      map[Partition]*track
}

type track struct {
	p     Partition
	gen   uint64
	queue []*Ticket // tracked messages in fetch order
	seen  bool
	high  int64 // highest offset tracked (RedeliveryRestart: the last)
	next  int64 // commit point; -1 until known
	dirty bool  // next moved since the last Committed
}

// Ticket is one tracked message. A nil Ticket (an ignored redelivery) is valid everywhere and
// changes nothing.
type Ticket struct {
	t       *track
	gen     uint64
	offset  int64
	holds   int
	settled bool
}

// NewWatermark returns an empty watermark with the given redelivery rule.
func NewWatermark(r Redelivery) *Watermark {
	return &Watermark{redelivery: r, parts: map[Partition]*track{}}
}

// Add tracks a fetched message with holds outstanding (0: done at once, e.g. a dead letter or a
// duplicate). Messages of one partition must be added in fetch order.
func (w *Watermark) Add(p Partition, offset int64, holds int) *Ticket {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.parts[p]
	if t == nil {
		t = &track{p: p, high: -1, next: -1}
		w.parts[p] = t
	}
	if t.seen && offset <= t.high {
		switch w.redelivery {
		case RedeliveryIgnore:
			return nil
		case RedeliveryRestart:
			t.gen++
			clear(t.queue)
			t.queue = t.queue[:0]
			t.next, t.dirty = -1, false
		}
	}
	t.seen = true
	if w.redelivery != RedeliveryTrack || offset > t.high {
		t.high = offset
	}
	tk := &Ticket{t: t, gen: t.gen, offset: offset, holds: holds}
	t.queue = append(t.queue, tk)
	return tk
}

// Hold adds one hold to a tracked message (the archiver: one per file its rows went to).
func (w *Watermark) Hold(tk *Ticket) {
	if tk == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	tk.holds++
}

// Release removes one hold. Releasing more holds than a message has is an error (a bug in the
// caller's bookkeeping); releasing a ticket of a restarted partition does nothing.
func (w *Watermark) Release(tk *Ticket) error {
	if tk == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.release(tk)
}

func (w *Watermark) release(tk *Ticket) error {
	if tk.gen != tk.t.gen {
		return nil
	}
	if tk.holds <= 0 {
		return fmt.Errorf("%w: %s/%d offset %d", ErrOverRelease, tk.t.p.Topic, tk.t.p.Partition, tk.offset)
	}
	tk.holds--
	return nil
}

// Done releases one hold and, if that lets the commit point of the ticket's partition move, moves
// it and returns it (true). Concurrent workers finishing messages call it and commit what it
// returns.
func (w *Watermark) Done(tk *Ticket) (Offset, bool, error) {
	if tk == nil {
		return Offset{}, false, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if tk.gen != tk.t.gen {
		return Offset{}, false, nil
	}
	if err := w.release(tk); err != nil {
		return Offset{}, false, err
	}
	if !w.pop(tk.t) {
		return Offset{}, false, nil
	}
	tk.t.dirty = false // handed to the caller to commit
	return w.offset(tk.t), true, nil
}

// Advance moves the commit point of every partition past its done prefix and returns the
// partitions whose commit point moved since the last Committed, sorted.
func (w *Watermark) Advance() []Offset {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Offset
	for _, t := range w.parts {
		w.pop(t)
		if t.dirty {
			out = append(out, w.offset(t))
		}
	}
	sortOffsets(out)
	return out
}

// Committed records that o was committed; o's partition is no longer reported by Advance until
// its commit point moves again.
func (w *Watermark) Committed(o Offset) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.parts[Partition{o.Topic, o.Partition}]; t != nil && t.next == o.Next {
		t.dirty = false
	}
}

// Offsets returns the commit point of every partition seen, sorted: the first message not done,
// or one past the last message tracked. (With RedeliveryTrack, a partition with nothing done yet
// is left out.) It does not move the commit points; call Advance first.
func (w *Watermark) Offsets() []Offset {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Offset
	for _, t := range w.parts {
		if o := w.offset(t); o.Next >= 0 {
			out = append(out, o)
		}
	}
	sortOffsets(out)
	return out
}

// Settled reports whether the message is below its partition's commit point (done and popped).
func (w *Watermark) Settled(tk *Ticket) bool {
	if tk == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return tk.settled
}

// Pending is the number of tracked messages not yet below their partition's commit point.
func (w *Watermark) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, t := range w.parts {
		n += len(t.queue)
	}
	return n
}

// pop drops the done prefix of t's queue and reports whether the commit point moved.
func (w *Watermark) pop(t *track) bool {
	k := 0
	last := int64(-1)
	for k < len(t.queue) && t.queue[k].holds <= 0 {
		t.queue[k].settled = true
		last = max(last, t.queue[k].offset) // redelivered copies may sit behind higher offsets
		k++
	}
	if k == 0 {
		return false
	}
	rest := copy(t.queue, t.queue[k:])
	clear(t.queue[rest:]) // do not keep popped tickets alive through the backing array
	t.queue = t.queue[:rest]
	next := t.next
	switch {
	case w.redelivery == RedeliveryTrack:
		next = max(next, last+1)
	case len(t.queue) > 0:
		next = t.queue[0].offset
	default:
		next = t.high + 1
	}
	if next == t.next {
		return false
	}
	t.next, t.dirty = next, true
	return true
}

// offset is t's commit point; before anything is popped, the first tracked offset (the position
// the partition was fetched from), except with RedeliveryTrack.
func (w *Watermark) offset(t *track) Offset {
	next := t.next
	if w.redelivery != RedeliveryTrack {
		if len(t.queue) > 0 {
			next = t.queue[0].offset
		} else {
			next = t.high + 1
		}
	}
	return Offset{Topic: t.p.Topic, Partition: t.p.Partition, Next: next}
}

func sortOffsets(o []Offset) {
	slices.SortFunc(o, func(a, b Offset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
}
