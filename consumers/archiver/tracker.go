package archiver

// topicPartition names one Kafka partition.
type topicPartition struct {
	Topic     string
	Partition int
}

// pending is one fetched message that is not yet safe to commit past: its
// rows sit in `waiting` open files. It is done (waiting == 0) once every
// file holding its rows is durable, or at once for a message that was a
// duplicate or was dead-lettered.
type pending struct {
	offset  int64
	waiting int
}

// tracker turns "which messages are durable" into commit offsets. Kafka
// keeps one offset per partition, so a partition's commit point may only
// move past a message once it and every earlier message are done; a
// message held by a slow (long-open) file holds back its partition.
type tracker struct {
	parts map[topicPartition]*queue
}

type queue struct {
	items []*pending
	// next is the offset to commit (first message not known done), -1
	// until something is done.
	next  int64
	dirty bool // next moved since the last successful commit
}

func newTracker() *tracker { return &tracker{parts: map[topicPartition]*queue{}} }

// add registers a fetched message in fetch order.
func (t *tracker) add(tp topicPartition, offset int64) *pending {
	q := t.parts[tp]
	if q == nil {
		q = &queue{next: -1}
		t.parts[tp] = q
	}
	p := &pending{offset: offset}
	q.items = append(q.items, p)
	return p
}

// advance pops the done prefix of every queue and marks partitions whose
// commit point moved.
func (t *tracker) advance() {
	for _, q := range t.parts {
		i := 0
		for i < len(q.items) && q.items[i].waiting == 0 {
			if n := q.items[i].offset + 1; n > q.next {
				q.next = n
				q.dirty = true
			}
			i++
		}
		if i > 0 {
			// Drop popped items without keeping the backing array alive forever.
			rest := copy(q.items, q.items[i:])
			clear(q.items[rest:])
			q.items = q.items[:rest]
		}
	}
}

// commits returns the partitions whose commit point moved, with the offset to
// commit (the next offset to read).
func (t *tracker) commits() map[topicPartition]int64 {
	out := map[topicPartition]int64{}
	for tp, q := range t.parts {
		if q.dirty {
			out[tp] = q.next
		}
	}
	return out
}

// committed records a successful commit of offset for tp.
func (t *tracker) committed(tp topicPartition, offset int64) {
	if q := t.parts[tp]; q != nil && q.next == offset {
		q.dirty = false
	}
}

// outstanding is the number of fetched messages not yet done.
func (t *tracker) outstanding() int {
	n := 0
	for _, q := range t.parts {
		n += len(q.items)
	}
	return n
}
