package admission

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"tau2rl/schemas"
	"tau2rl/tau2/data"
)

// SplitPath is where τ² keeps a domain's task splits: <dataDir>/tau2/domains/<domain>/split_tasks.json.
func SplitPath(dataDir, domain string) string {
	return filepath.Join(dataDir, "tau2", "domains", domain, "split_tasks.json")
}

// ParseSplit reads a τ² split_tasks.json ({"train": ["0", "1", …], "test": […], …}) and returns the
// tasks of split, in file order. Duplicate or empty ids are errors.
func ParseSplit(data []byte, domain, split string) ([]Task, error) {
	if err := schemas.ValidatePathComponent(domain); err != nil {
		return nil, fmt.Errorf("admission: domain: %w", err)
	}
	if err := schemas.ValidatePathComponent(split); err != nil {
		return nil, fmt.Errorf("admission: split: %w", err)
	}
	var splits map[string][]string
	if err := json.Unmarshal(data, &splits); err != nil {
		return nil, fmt.Errorf("admission: %s split file: %w", domain, err)
	}
	ids, ok := splits[split]
	if !ok {
		names := make([]string, 0, len(splits))
		for k := range splits {
			names = append(names, k)
		}
		slices.Sort(names)
		return nil, fmt.Errorf("admission: %s has no split %q (has %v)", domain, split, names)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("admission: %s split %q is empty", domain, split)
	}
	seen := map[string]bool{}
	out := make([]Task, 0, len(ids))
	for _, id := range ids {
		if id == "" || seen[id] {
			return nil, fmt.Errorf("admission: %s split %q: empty or duplicate task id %q", domain, split, id)
		}
		seen[id] = true
		out = append(out, Task{Domain: domain, Split: split, ID: id})
	}
	return out, nil
}

// LoadTasks reads every source's split from dataDir and concatenates the tasks.
func LoadTasks(dataDir string, sources []Source) ([]Task, error) {
	if len(sources) == 0 {
		return nil, fmt.Errorf("admission: no task sources configured")
	}
	var out []Task
	for _, s := range sources {
		if err := schemas.ValidatePathComponent(s.Domain); err != nil {
			return nil, fmt.Errorf("admission: domain: %w", err)
		}
		b, err := os.ReadFile(SplitPath(dataDir, s.Domain))
		if err != nil {
			return nil, fmt.Errorf("admission: %w", err)
		}
		ts, err := ParseSplit(b, s.Domain, s.Split)
		if err != nil {
			return nil, err
		}
		if len(s.TaskIDs) > 0 {
			if ts, err = data.SelectIDs(ts, func(t Task) string { return t.ID }, s.TaskIDs); err != nil {
				return nil, fmt.Errorf("admission: task_ids: %s split %q %w", s.Domain, s.Split, err)
			}
		}
		out = append(out, ts...)
	}
	return out, nil
}
