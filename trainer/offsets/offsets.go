// Package offsets decides which Kafka offsets the trainer may commit.
//
// The rule (system.md: "the trainer commits after the checkpoint of the step that used them"): an
// offset is committable once every trajectory of its message is either discarded (duplicate,
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
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int
}

// Target is a commit target: Next is the offset to resume the partition from.
type Target struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Next      int64  `json:"next"`
}

// Handle identifies a tracked message. The zero Handle is a message that does not take part in
// the watermark (a redelivery of an offset already tracked or committed).
type Handle uint64

type entry struct {
	h         Handle
	offset    int64
	remaining int   // trajectories not yet discarded or trained
	lastStep  int64 // latest step that trained one of its trajectories; -1 if none
	trained   []string
}

type partition struct {
	queue []*entry // tracked messages in offset order
	next  int64    // highest offset seen + 1
	seen  bool
}

// Tracker tracks messages per partition. It is not safe for concurrent use.
type Tracker struct {
	parts   map[TopicPartition]*partition
	entries map[Handle]*entry
	nextID  Handle
	// checkpointed is the latest step whose checkpoint is durable.
	checkpointed int64
}

// New returns an empty tracker; no step is checkpointed yet.
func New() *Tracker {
	return &Tracker{parts: map[TopicPartition]*partition{}, entries: map[Handle]*entry{}, checkpointed: -1}
}

// Track registers a message with n trajectories and returns its handle. A message whose offset
// is not above every offset seen on its partition is a redelivery (after a rebalance or a
// retried fetch); it gets the zero handle and never moves the watermark.
func (t *Tracker) Track(tp TopicPartition, offset int64, n int) Handle {
	p := t.parts[tp]
	if p == nil {
		p = &partition{}
		t.parts[tp] = p
	}
	if p.seen && offset < p.next {
		return 0
	}
	p.seen = true
	p.next = offset + 1
	t.nextID++
	e := &entry{h: t.nextID, offset: offset, remaining: n, lastStep: -1}
	p.queue = append(p.queue, e)
	t.entries[e.h] = e
	return t.nextID
}

// Discard marks one trajectory of the message as not going to be trained.
func (t *Tracker) Discard(h Handle) error {
	e, err := t.get(h)
	if e == nil {
		return err
	}
	e.remaining--
	return nil
}

// Trained marks one trajectory of the message, id, as trained in step.
func (t *Tracker) Trained(h Handle, step int64, id string) error {
	e, err := t.get(h)
	if e == nil {
		return err
	}
	e.remaining--
	e.lastStep = max(e.lastStep, step)
	e.trained = append(e.trained, id)
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

func (t *Tracker) done(e *entry) bool {
	return e.remaining <= 0 && e.lastStep <= t.checkpointed
}

// Checkpointed records that every step up to step is durably checkpointed and returns the commit
// target of every partition seen (the lowest offset not done, or one past the last offset seen),
// sorted by topic and partition, plus the ids trained in done-or-partly-done messages above the
// targets.
func (t *Tracker) Checkpointed(step int64) (targets []Target, trainedAbove []string) {
	t.checkpointed = max(t.checkpointed, step)
	for tp, p := range t.parts {
		k := 0
		for k < len(p.queue) && t.done(p.queue[k]) {
			k++
		}
		for _, e := range p.queue[:k] {
			delete(t.entries, e.h)
		}
		p.queue = p.queue[k:]
		next := p.next
		if len(p.queue) > 0 {
			next = p.queue[0].offset
		}
		targets = append(targets, Target{Topic: tp.Topic, Partition: tp.Partition, Next: next})
		for _, e := range p.queue {
			if e.lastStep >= 0 && e.lastStep <= t.checkpointed {
				trainedAbove = append(trainedAbove, e.trained...)
			}
		}
	}
	slices.SortFunc(targets, func(a, b Target) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return a.Partition - b.Partition
	})
	slices.Sort(trainedAbove)
	return targets, trainedAbove
}

// Pending returns the number of tracked messages not yet committable.
func (t *Tracker) Pending() int {
	n := 0
	for _, p := range t.parts {
		n += len(p.queue)
	}
	return n
}
