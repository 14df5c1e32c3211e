// Package data locates and loads a τ² data directory (τ²-bench's data/
// layout): per-domain tasks (HEAD 1.0 files and the v0.2.1 files under
// _versions/), splits, policies and the user-simulator guidelines.
package data

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"tau2rl/lib/assets"
)

// EnvVar names the environment variable that points at the data directory
// (as in τ²-bench and AReaL's τ² example).
const EnvVar = "TAU2_DATA_DIR"

// Dir resolves the τ² data directory with lib/assets (docs/ASSETS.md): override
// (a flag or config key) if non-empty, else $TAU2_DATA_DIR, else
// ../shared/tau2-data next to the working directory or a parent, else the
// cache of a previous download, else a download of the pinned tau2-bench
// revision (unless TAU2RL_OFFLINE=1). The result contains tau2/domains/.
func Dir(override string) (string, error) {
	d, err := assets.Tau2DataDir(override)
	if err != nil {
		return "", fmt.Errorf("data: %w", err)
	}
	return d, nil
}

// DomainDirName maps a τ² domain name to its data directory name
// ("telecom-workflow" shares telecom's files).
func DomainDirName(domain string) string {
	if strings.HasPrefix(domain, "telecom") {
		return "telecom"
	}
	return domain
}

// DomainDir returns <dataDir>/tau2/domains/<domain dir>.
func DomainDir(dataDir, domain string) string {
	return filepath.Join(dataDir, "tau2", "domains", DomainDirName(domain))
}

// Version selects a task-file version.
type Version string

// Known task-file versions.
const (
	// Head is the current (1.0) data: tau2/domains/<domain>/tasks.json.
	Head Version = ""
	// V021 is τ²-bench v0.2.1 (commit 0ed2fd8), under
	// _versions/v0.2.1-*/tau2/domains/<domain>/tasks.json (airline, retail,
	// mock; telecom's tasks did not change).
	V021 Version = "v0.2.1"
)

// ParseVersion accepts "", "head", "1.0", "v0.2.1" and "0.2.1".
func ParseVersion(s string) (Version, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "head", "1.0", "v1.0":
		return Head, nil
	case "v0.2.1", "0.2.1":
		return V021, nil
	}
	return Head, fmt.Errorf("data: unknown task version %q (want head or v0.2.1)", s)
}

// TasksPath returns the task file of a domain for a version. For V021 it
// falls back to the HEAD file when the version directory has no file for
// the domain (telecom).
func TasksPath(dataDir, domain string, v Version) (string, error) {
	head := filepath.Join(DomainDir(dataDir, domain), "tasks.json")
	if v == Head {
		return head, nil
	}
	matches, err := filepath.Glob(filepath.Join(dataDir, "_versions", string(v)+"-*"))
	if err != nil {
		return "", fmt.Errorf("data: %w", err)
	}
	for _, m := range matches {
		p := filepath.Join(m, "tau2", "domains", DomainDirName(domain), "tasks.json")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if len(matches) == 0 {
		return "", fmt.Errorf("data: no _versions/%s-* directory in %s: %w", v, dataDir, ErrNotFound)
	}
	return head, nil
}
