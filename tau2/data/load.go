package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"tau2rl/tau2/pyjson"
)

// ReadFile reads a file of the data directory relative to a domain's
// directory (e.g. "policy.md", "db.json").
func ReadFile(dataDir, domain, name string) (string, error) {
	p := filepath.Join(DomainDir(dataDir, domain), name)
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("data: %w", err)
	}
	return string(b), nil
}

// LoadTasksFile reads and validates a task file.
func LoadTasksFile(path string) ([]*Task, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	tasks, err := ParseTasks(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tasks, nil
}

// LoadTasks loads all tasks of a domain for a version (file order).
func LoadTasks(dataDir, domain string, v Version) ([]*Task, error) {
	p, err := TasksPath(dataDir, domain, v)
	if err != nil {
		return nil, err
	}
	return LoadTasksFile(p)
}

// Splits maps a split name ("train", "test", "base", telecom's "small" and
// "full") to task ids, in file order.
type Splits = pyjson.Map[[]string]

// LoadSplits reads a domain's split_tasks.json.
func LoadSplits(dataDir, domain string) (*Splits, error) {
	text, err := ReadFile(dataDir, domain, "split_tasks.json")
	if err != nil {
		return nil, err
	}
	var s Splits
	if err := pyjson.Unmarshal([]byte(text), &s); err != nil {
		return nil, fmt.Errorf("data: %s split_tasks.json: %w", domain, err)
	}
	return &s, nil
}

// FilterSplit returns the tasks whose ids are in the named split, in task
// file order (τ²'s get_tasks(task_split_name)).
func FilterSplit(tasks []*Task, splits *Splits, name string) ([]*Task, error) {
	ids, ok := splits.Get(name)
	if !ok {
		return nil, fmt.Errorf("data: Invalid task split name: %s. Valid splits are: %v", name, splits.Keys())
	}
	in := make(map[string]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	out := make([]*Task, 0, len(ids))
	for _, t := range tasks {
		if in[t.ID] {
			out = append(out, t)
		}
	}
	return out, nil
}

// LoadSplit loads a domain's tasks restricted to a split ("" = all tasks).
func LoadSplit(dataDir, domain string, v Version, split string) ([]*Task, error) {
	tasks, err := LoadTasks(dataDir, domain, v)
	if err != nil || split == "" {
		return tasks, err
	}
	if _, err := os.Stat(filepath.Join(DomainDir(dataDir, domain), "split_tasks.json")); errors.Is(err, os.ErrNotExist) && v == Head {
		// banking_knowledge has no split file: upstream's get_tasks ignores
		// task_split_name there, so every split name means all its tasks.
		return tasks, nil
	}
	splits, err := LoadSplits(dataDir, domain)
	if err != nil {
		return nil, err
	}
	return FilterSplit(tasks, splits, split)
}

// UserGuidelines returns the user simulator's guidelines: the tools variant
// (simulation_guidelines_tools.md) when the user has tools.
func UserGuidelines(dataDir string, withTools bool) (string, error) {
	name := "simulation_guidelines.md"
	if withTools {
		name = "simulation_guidelines_tools.md"
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "tau2", "user_simulator", name))
	if err != nil {
		return "", fmt.Errorf("data: %w", err)
	}
	return string(b), nil
}

// UserSystemPrompt renders the user simulator's system prompt as τ² does:
// "{guidelines}\n\n<scenario>\n{str(user_scenario)}\n</scenario>".
func UserSystemPrompt(guidelines string, t *Task) string {
	return guidelines + "\n\n<scenario>\n" + t.UserScenario.String() + "\n</scenario>"
}
