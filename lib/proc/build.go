package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// ModuleRoot returns the directory holding go.mod, found by walking up from the working
// directory, so that process-level tests find cmd/ and deploy/ wherever `go test` runs them.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("proc: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("proc: no go.mod above %s", wd)
		}
	}
}

// Binaries builds the tau2-* commands into one directory, each at most once: several tests of a
// process need the same binaries and a link of each is seconds of CPU.
type Binaries struct {
	// Root is the module root; Dir receives the binaries.
	Root, Dir string

	mu    sync.Mutex
	built map[string]error
}

// NewBinaries prepares a build of the commands under root/cmd into dir.
func NewBinaries(root, dir string) *Binaries {
	return &Binaries{Root: root, Dir: dir, built: map[string]error{}}
}

// TempBinaries prepares a build of the module's commands (the module of the working directory,
// ModuleRoot) into a new temporary directory, which Remove deletes. Process-level tests make one
// in TestMain and share it.
func TempBinaries() (*Binaries, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tau2rl-bin-")
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	return NewBinaries(root, dir), nil
}

// Remove deletes the directory of the binaries.
func (b *Binaries) Remove() error { return os.RemoveAll(b.Dir) }

// Build builds the named commands (e.g. "tau2-archiver") that are not built yet, in one go
// invocation, and returns the first failure among names.
func (b *Binaries) Build(names ...string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var toBuild []string
	for _, n := range names {
		if _, ok := b.built[n]; !ok && !slices.Contains(toBuild, n) {
			toBuild = append(toBuild, n)
		}
	}
	if len(toBuild) > 0 {
		args := []string{"build", "-o", b.Dir + string(filepath.Separator)}
		for _, n := range toBuild {
			args = append(args, "./cmd/"+n)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = b.Root
		out, err := cmd.CombinedOutput()
		for _, n := range toBuild {
			if err != nil {
				b.built[n] = fmt.Errorf("go build %s: %v\n%s", strings.Join(toBuild, " "), err, out)
			} else {
				b.built[n] = nil
			}
		}
	}
	for _, n := range names {
		if err := b.built[n]; err != nil {
			return err
		}
	}
	return nil
}

// Path is the built binary's path.
func (b *Binaries) Path(name string) string { return filepath.Join(b.Dir, name) }
