package data

import "fmt"

// SelectIDs returns the items that ids name, in the order of ids — the task_ids option of the
// trainer's admission, the self-driven producer and tau2-run experiment. An id that names no
// item, or one named twice, is an error (`has no task "7"`, `task "7" named twice`); callers
// prefix it with the domain and split.
func SelectIDs[T any](items []T, idOf func(T) string, ids []string) ([]T, error) {
	byID := make(map[string]T, len(items))
	for _, it := range items {
		byID[idOf(it)] = it
	}
	out := make([]T, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		it, ok := byID[id]
		switch {
		case !ok:
			return nil, fmt.Errorf("has no task %q", id)
		case seen[id]:
			return nil, fmt.Errorf("task %q named twice", id)
		}
		seen[id] = true
		out = append(out, it)
	}
	return out, nil
}
