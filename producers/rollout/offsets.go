package rollout

import "sync"

// offsetTracker decides what may be committed on the request topic. Requests
// finish out of order, but a Kafka commit means "everything before this
// offset is done", so each partition keeps its fetched offsets in order and
// commits only up to the first one still running. A partition whose fetch
// position moves backwards (a rebalance handed it back and Kafka redelivers)
// starts over; the requests still running from before finish but commit
// nothing, so nothing is ever committed that is not done.
type offsetTracker struct {
	mu    sync.Mutex
	parts map[partKey]*partQueue
}

type partKey struct {
	topic     string
	partition int
}

type partQueue struct {
	gen     int
	entries []entry // fetched, in offset order
	last    int64   // highest offset fetched
}

type entry struct {
	offset int64
	done   bool
}

// ticket identifies one fetched message for done().
type ticket struct {
	key    partKey
	gen    int
	offset int64
}

func newOffsetTracker() *offsetTracker { return &offsetTracker{parts: map[partKey]*partQueue{}} }

// add records a fetched message.
func (t *offsetTracker) add(topic string, partition int, offset int64) ticket {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := partKey{topic, partition}
	q := t.parts[k]
	if q == nil {
		q = &partQueue{last: -1}
		t.parts[k] = q
	}
	if offset <= q.last {
		q.gen++
		q.entries = q.entries[:0]
	}
	q.last = offset
	q.entries = append(q.entries, entry{offset: offset})
	return ticket{key: k, gen: q.gen, offset: offset}
}

// done marks a message processed. It returns the offset of the last message
// that may now be committed (everything up to it is done) and true, or false
// when nothing new is committable.
func (t *offsetTracker) done(tk ticket) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.parts[tk.key]
	if q == nil || q.gen != tk.gen {
		return 0, false
	}
	for i := range q.entries {
		if q.entries[i].offset == tk.offset {
			q.entries[i].done = true
			break
		}
	}
	n := 0
	for n < len(q.entries) && q.entries[n].done {
		n++
	}
	if n == 0 {
		return 0, false
	}
	off := q.entries[n-1].offset
	q.entries = append(q.entries[:0], q.entries[n:]...)
	return off, true
}

// pending counts fetched messages not yet committable.
func (t *offsetTracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, q := range t.parts {
		n += len(q.entries)
	}
	return n
}
