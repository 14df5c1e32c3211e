package archiver

import (
	"tau2rl/lib/seen"
	"tau2rl/schemas"
)

// idKey is a trajectory id reduced to 16 bytes (schemas.IDKey).
type idKey = schemas.IDKey

func keyOf(id string) idKey { return schemas.KeyOfID(id) }

// idSet remembers trajectory ids: the last dedup_window archived ids (lib/seen's rule: bounded by
// count, first in first out) plus pinned ids that are never evicted (those loaded at start-up
// from files whose offsets were not committed, which Kafka is about to redeliver).
type idSet struct {
	recent *seen.Set[idKey]
	pinned map[idKey]struct{}
}

func newIDSet(window int) *idSet {
	return &idSet{recent: seen.New[idKey](window), pinned: map[idKey]struct{}{}}
}

func (s *idSet) has(k idKey) bool {
	if _, ok := s.pinned[k]; ok {
		return true
	}
	return s.recent.Has(k)
}

// add remembers k, evicting the oldest recent id when the window is full.
func (s *idSet) add(k idKey) { s.recent.Add(k) }

func (s *idSet) pin(k idKey) { s.pinned[k] = struct{}{} }

func (s *idSet) len() int { return s.recent.Len() + len(s.pinned) }
