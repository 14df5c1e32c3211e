// Package seen is the one bounded set of recently seen ids that the at-least-once consumers use to
// drop redelivered copies: the archiver (trajectory ids, dedup_window), the trainer's grouper
// (trajectory ids, group.dedupe_capacity) and the rollout service (completed request ids).
//
// The rule: a Set remembers the last n distinct keys added, in insertion order; adding a new key
// when it holds n forgets the oldest (first in, first out). Adding a key it holds changes nothing:
// its place is where it was first added (not least-recently-used). Why count and insertion order:
//
//   - A redelivered copy follows its original by a number of messages, not a time: Kafka hands a
//     partition back from the last committed offset, so what a consumer must still remember is
//     "the ids added since that offset", a count. A time bound would let a burst grow memory
//     without limit and a stalled consumer forget ids it still needs.
//   - A count bound is exact: n ids, n ring slots and one map entry each, whatever the traffic —
//     the configured window means what it says ("the last dedup_window ids") and is testable.
//     (The grouper's earlier two-generation maps remembered between n and 2n−1 ids and held up
//     to 2n; the archiver and the rollout service already used this rule.)
//   - Insertion order, not LRU: a key is seen again only as a duplicate, which is dropped, and
//     refreshing it on lookup would make Has a write; the window is "since the original".
//
// A Set is not safe for concurrent use: its users hold their own lock (the rollout service) or
// run on one goroutine (the archiver, the grouper).
package seen

// Set is a bounded set of keys with first-in, first-out eviction; see the package doc. The zero
// value remembers nothing; use New.
type Set[K comparable] struct {
	keys map[K]struct{}
	// ring holds the keys in insertion order once full; until then it grows by append, so a large
	// window costs memory only as ids arrive. head is the oldest key's slot once full.
	ring []K
	head int
	n    int
}

// New returns a set that remembers the last n distinct keys added. n ≤ 0 remembers nothing (the
// archiver's dedup_window 0 turns its de-duplication off).
func New[K comparable](n int) *Set[K] {
	n = max(n, 0)
	return &Set[K]{keys: make(map[K]struct{}, min(n, 1<<16)), n: n}
}

// Has reports whether k is among the keys remembered.
func (s *Set[K]) Has(k K) bool {
	_, ok := s.keys[k]
	return ok
}

// Add remembers k, forgetting the oldest key when the set is full, and reports whether k was new
// (false: it was already remembered, and nothing changed).
func (s *Set[K]) Add(k K) bool {
	if s.n == 0 {
		return false
	}
	if _, ok := s.keys[k]; ok {
		return false
	}
	if len(s.ring) < s.n {
		s.ring = append(s.ring, k)
	} else {
		delete(s.keys, s.ring[s.head])
		s.ring[s.head] = k
		s.head = (s.head + 1) % s.n
	}
	s.keys[k] = struct{}{}
	return true
}

// Len is how many keys are remembered: at most the n given to New.
func (s *Set[K]) Len() int { return len(s.keys) }

// Cap is the n given to New (0 for a negative n).
func (s *Set[K]) Cap() int { return s.n }
