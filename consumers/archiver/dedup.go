package archiver

import "crypto/sha256"

// idKey is a trajectory id reduced to 16 bytes of its SHA-256: ids are
// producer-chosen strings, and a fixed-size key keeps the set at about 40
// bytes per id. A collision would need 2^64 ids.
type idKey [16]byte

func keyOf(id string) idKey {
	s := sha256.Sum256([]byte(id))
	var k idKey
	copy(k[:], s[:16])
	return k
}

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
