package proc_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/lib/proc"
)

func TestModuleRoot(t *testing.T) {
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	if wd, _ := os.Getwd(); !strings.HasPrefix(wd, root) {
		t.Fatalf("root %s is not above %s", root, wd)
	}
}

// TestBuildFailure: a command that does not build is an error naming it, for every later call
// too (a failed build is not retried per test).
func TestBuildFailure(t *testing.T) {
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b := proc.NewBinaries(root, t.TempDir())
	for i := 0; i < 2; i++ {
		if err := b.Build("no-such-command"); err == nil || !strings.Contains(err.Error(), "go build no-such-command") {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := b.Path("tau2-broker"); got != filepath.Join(b.Dir, "tau2-broker") {
		t.Fatalf("Path: %s", got)
	}
}

func TestTempBinaries(t *testing.T) {
	b, err := proc.TempBinaries()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.Root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(b.Dir); err != nil || !st.IsDir() {
		t.Fatalf("binaries directory: %v", err)
	}
	if err := b.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(b.Dir); !os.IsNotExist(err) {
		t.Fatalf("directory left after Remove: %v", err)
	}
}
