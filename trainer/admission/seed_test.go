package admission

import (
	"slices"
	"testing"
	"time"
)

// TestSeedChangesTaskOrder: admission.seed is the GRPO trainer's seed for what it asks for —
// the same seed requests the tasks in the same order, another seed in another order (over 13
// tasks, the airline train tasks with a write, two permutations agree by chance with
// probability 1/13!).
func TestSeedChangesTaskOrder(t *testing.T) {
	order := func(seed uint64) []string {
		cfg := DefaultConfig()
		cfg.Seed = seed
		m, err := New(cfg, tasks(13), 1, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for len(ids) < 26 { // two epochs
			reqs, err := m.Issue(0, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reqs {
				ids = append(ids, r.TaskID)
				m.Finished(r.RequestID, "only")
			}
		}
		return ids[:26]
	}
	one := order(1)
	if !slices.Equal(one, order(1)) {
		t.Fatal("seed 1 requested the tasks in two orders")
	}
	if two := order(2); slices.Equal(one, two) || slices.Equal(one[:13], two[:13]) {
		t.Fatalf("seeds 1 and 2 requested the same order %v", one)
	}
}
