package group

// idSet is a bounded set of strings: it remembers at least capacity of the most recently added
// ids. It keeps two generations of maps; when the current one is full it becomes the previous one
// and the oldest generation is forgotten. This bounds memory (≈ 2 × capacity ids) for a trainer
// that runs for weeks, while a redelivery — which follows its original within one consumer
// session, i.e. far fewer than capacity ids later — is still caught.
type idSet struct {
	capacity  int
	cur, prev map[string]struct{}
}

func newIDSet(capacity int) idSet {
	return idSet{capacity: capacity, cur: make(map[string]struct{})}
}

func (s *idSet) has(id string) bool {
	if _, ok := s.cur[id]; ok {
		return true
	}
	_, ok := s.prev[id]
	return ok
}

func (s *idSet) add(id string) {
	if len(s.cur) >= s.capacity {
		s.prev, s.cur = s.cur, make(map[string]struct{}, s.capacity)
	}
	s.cur[id] = struct{}{}
}
