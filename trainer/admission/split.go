package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
		var ts []Task
		b, err := os.ReadFile(SplitPath(dataDir, s.Domain))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if ts, err = wholeDomain(dataDir, s); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, fmt.Errorf("admission: %w", err)
		default:
			if ts, err = ParseSplit(b, s.Domain, s.Split); err != nil {
				return nil, err
			}
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

// wholeDomain is the split of a domain without split_tasks.json
// (banking_knowledge): as upstream's get_tasks, which ignores the split name
// there, every split name means all the domain's tasks, in file order
// (tau2/data.LoadSplit). A domain with no tasks file at all is an error.
func wholeDomain(dataDir string, s Source) ([]Task, error) {
	if err := schemas.ValidatePathComponent(s.Split); err != nil {
		return nil, fmt.Errorf("admission: split: %w", err)
	}
	tasks, err := data.LoadSplit(dataDir, s.Domain, data.Head, s.Split)
	if err != nil {
		return nil, fmt.Errorf("admission: %s has no split_tasks.json and its tasks do not load: %w", s.Domain, err)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("admission: %s has no tasks", s.Domain)
	}
	out := make([]Task, len(tasks))
	for i, t := range tasks {
		out[i] = Task{Domain: s.Domain, Split: s.Split, ID: t.ID}
	}
	return out, nil
}
