package archiver

import "tau2rl/schemas"

// idKey is a trajectory id reduced to 16 bytes (schemas.IDKey).
type idKey = schemas.IDKey

func keyOf(id string) idKey { return schemas.KeyOfID(id) }

// idSet remembers trajectory ids: a bounded FIFO window of recent ids plus
// pinned ids that are never evicted (those loaded at start-up from files
// whose offsets were not committed, which Kafka is about to redeliver).
type idSet struct {
	recent map[idKey]struct{}
	ring   []idKey
	head   int
	full   bool
	pinned map[idKey]struct{}
}

func newIDSet(window int) *idSet {
	return &idSet{recent: make(map[idKey]struct{}, min(window, 1<<16)), ring: make([]idKey, window), pinned: map[idKey]struct{}{}}
}

func (s *idSet) has(k idKey) bool {
	if _, ok := s.pinned[k]; ok {
		return true
	}
	_, ok := s.recent[k]
	return ok
}

// add remembers k, evicting the oldest recent id when the window is full.
func (s *idSet) add(k idKey) {
	if len(s.ring) == 0 {
		return
	}
	if _, ok := s.recent[k]; ok {
		return
	}
	if s.full {
		delete(s.recent, s.ring[s.head])
	}
	s.ring[s.head] = k
	s.recent[k] = struct{}{}
	s.head++
	if s.head == len(s.ring) {
		s.head, s.full = 0, true
	}
}

func (s *idSet) pin(k idKey) { s.pinned[k] = struct{}{} }

func (s *idSet) len() int { return len(s.recent) + len(s.pinned) }
