// Package offsets decides which Kafka offsets the trainer may commit.
//
// The rule (docs/ARCHITECTURE.md, "Offsets and delivery": the trainer commits after the checkpoint
// of the step that used them) is lib/stream's Watermark with one more kind of hold: an offset is
// committable once every trajectory of its message is either discarded (duplicate,
// infrastructure error, stale, filtered, timed out) or was trained in a step that has been
// checkpointed. Messages of groups still waiting for members stay pending, so per partition the
// commit stops at the lowest offset that is not yet done: Kafka offsets are a watermark, and
// committing past a pending message would lose it on a crash.
//
// Messages that are done but sit above a pending one are redelivered after a restart. The
// tracker reports the trajectory ids trained in them (TrainedAbove) so the checkpoint state can
// tell the restarted trainer to skip them instead of training them twice.
package offsets

import (
	"fmt"
	"slices"

	"tau2rl/lib/stream"
)

// TopicPartition names a partition.
type TopicPartition = stream.Partition

// Target is a commit target: Next is the offset to resume the partition from.
type Target = stream.Offset

// Handle identifies a tracked message. The zero Handle is a message that does not take part in
// the watermark (a redelivery of an offset already tracked or committed).
type Handle uint64

type entry struct {
	tk        *stream.Ticket // one hold per trajectory not yet discarded or checkpointed
	offset    int64
	remaining int   // trajectories not yet discarded or trained
	lastStep  int64 // latest step that trained one of its trajectories; -1 if none
	trained   []string
}

// Tracker tracks messages per partition on a stream.Watermark (the pipeline's one commit rule,
// with redeliveries ignored: the original message's trajectories are still in memory). A
// trajectory's hold is released when it is discarded, or when the step that trained it is
// checkpointed. It is not safe for concurrent use.
type Tracker struct {
	w       *stream.Watermark
	entries map[Handle]*entry
	nextID  Handle
	// awaiting holds, per step not yet checkpointed, one handle per trajectory trained in it.
	awaiting map[int64][]Handle
	// checkpointed is the latest step whose checkpoint is durable.
	checkpointed int64
}

// New returns an empty tracker; no step is checkpointed yet.
func New() *Tracker {
	return &Tracker{w: stream.NewWatermark(stream.RedeliveryIgnore), entries: map[Handle]*entry{},
		awaiting: map[int64][]Handle{}, checkpointed: -1}
}

// Track registers a message with n trajectories and returns its handle. A message whose offset
// is not above every offset seen on its partition is a redelivery (after a rebalance or a
// retried fetch); it gets the zero handle and never moves the watermark.
func (t *Tracker) Track(tp TopicPartition, offset int64, n int) Handle {
	tk := t.w.Add(tp, offset, n)
	if tk == nil {
		return 0
	}
	t.nextID++
	t.entries[t.nextID] = &entry{tk: tk, offset: offset, remaining: n, lastStep: -1}
	return t.nextID
}

// Discard marks one trajectory of the message as not going to be trained.
func (t *Tracker) Discard(h Handle) error {
	e, err := t.get(h)
	if e == nil {
		return err
	}
	e.remaining--
	return t.release(e)
}

// Trained marks one trajectory of the message, id, as trained in step. Its hold is released once
// step is checkpointed.
func (t *Tracker) Trained(h Handle, step int64, id string) error {
	e, err := t.get(h)
	if e == nil {
		return err
	}
	e.remaining--
	e.lastStep = max(e.lastStep, step)
	e.trained = append(e.trained, id)
	if step <= t.checkpointed {
		return t.release(e)
	}
	t.awaiting[step] = append(t.awaiting[step], h)
	return nil
}

func (t *Tracker) release(e *entry) error {
	if err := t.w.Release(e.tk); err != nil {
		return fmt.Errorf("offsets: %w", err)
	}
	return nil
}

func (t *Tracker) get(h Handle) (*entry, error) {
	if h == 0 {
		return nil, nil
	}
	e := t.entries[h]
	if e == nil {
		return nil, fmt.Errorf("offsets: unknown handle %d", h)
	}
	if e.remaining <= 0 {
		return nil, fmt.Errorf("offsets: message at offset %d resolved more often than it has trajectories", e.offset)
	}
	return e, nil
}

// Checkpointed records that every step up to step is durably checkpointed and returns the commit
// target of every partition seen (the lowest offset not done, or one past the last offset seen),
// sorted by topic and partition, plus the ids trained in done-or-partly-done messages above the
// targets.
func (t *Tracker) Checkpointed(step int64) (targets []Target, trainedAbove []string) {
	t.checkpointed = max(t.checkpointed, step)
	for s, hs := range t.awaiting {
		if s > t.checkpointed {
			continue
		}
		for _, h := range hs {
			if e := t.entries[h]; e != nil {
				// Cannot fail: each trained trajectory holds once (Track's n, checked by get).
				_ = t.w.Release(e.tk)
			}
		}
		delete(t.awaiting, s)
	}
	t.w.Advance()
	for h, e := range t.entries {
		if t.w.Settled(e.tk) {
			delete(t.entries, h)
			continue
		}
		if e.lastStep >= 0 && e.lastStep <= t.checkpointed {
			trainedAbove = append(trainedAbove, e.trained...)
		}
	}
	slices.Sort(trainedAbove)
	return t.w.Offsets(), trainedAbove
}

// Pending returns the number of tracked messages not yet committable.
func (t *Tracker) Pending() int { return t.w.Pending() }
