package deploytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"tau2rl/lib/proc"
)

// Every binary a unit, a config or a shutdown test refers to.
var allBinaries = []string{
	"tau2-producer", "tau2-archiver", "tau2-trainer", "tau2-replay", "tau2-eval", "tau2-broker", "tau2-scripted-llm",
	"tau2-sampler", "tau2-proxy",
}

var (
	root string         // module root
	bins *proc.Binaries // built once per `go test` process
)

func TestMain(m *testing.M) {
	var err error
	if bins, err = proc.TempBinaries(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root = bins.Root
	code := m.Run()
	bins.Remove()
	os.Exit(code)
}

// needBinaries builds the named binaries or fails the test.
func needBinaries(t *testing.T, names ...string) {
	t.Helper()
	if err := bins.Build(names...); err != nil {
		t.Fatal(err)
	}
}

// needTool skips the test when an operator tool is not installed (make deps
// installs it); that is the only reason these tests skip.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("TAU2RL_REQUIRE_TOOLS") != "" {
			t.Fatalf("%s is not installed and TAU2RL_REQUIRE_TOOLS is set (CI): this test must run (make deps DEPS_ARGS=--yes installs Debian package %s)", name, debPackage[name])
		}
		t.Skipf("%s is not installed (make deps installs it: Debian package %s)", name, debPackage[name])
	}
	return p
}

var debPackage = map[string]string{
	"systemd-analyze": "systemd", "systemd-sysusers": "systemd", "systemd-tmpfiles": "systemd", "promtool": "prometheus",
}

// repoPath joins a slash path to the module root.
func repoPath(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
