// Package scripts tests the shell scripts beside it and the Makefile targets that run them, as a
// user would: with fake go, apt-get and id commands on PATH, so nothing is built or installed.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBin makes a directory of executable scripts (name → body) and returns it.
func fakeBin(t *testing.T, cmds map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range cmds {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// run runs a script of this directory with bash, PATH set to path, stdin empty (no terminal).
func run(t *testing.T, path string, script string, args ...string) (string, int) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	cmd := exec.Command(bash, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+path)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestInstallDepsAsksFirst (issue 27 item 16): with every tool missing, install-deps.sh says
// what is missing and why; --check and a run without a terminal to ask on install nothing; only
// --yes (what CI passes) installs, and only the missing packages.
func TestInstallDepsAsksFirst(t *testing.T) {
	log := filepath.Join(t.TempDir(), "apt.log")
	bin := fakeBin(t, map[string]string{
		"apt-get": `echo "$@" >> ` + log,
		"id":      "echo 0", // root
		"awk":     `exec /usr/bin/awk "$@"`,
	})
	for _, c := range []struct {
		args    []string
		install bool
		want    string
	}{
		{[]string{"--check"}, false, ""},
		{nil, false, "not installing without a terminal to ask on; run with --yes"},
		{[]string{"--yes"}, true, "install-deps: apt-get install kcat prometheus systemd npm"},
	} {
		os.Remove(log)
		out, code := run(t, bin, "install-deps.sh", c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, out)
		}
		for _, w := range []string{"kcat: kcat, for the Kafka interoperability test", "prometheus: promtool", "systemd: systemd-analyze", "npm: node and npm", c.want} {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, out)
			}
		}
		apt, _ := os.ReadFile(log)
		if installed := strings.Contains(string(apt), "install"); installed != c.install {
			t.Errorf("%v: apt-get install called: %v, want %v (%q)", c.args, installed, c.install, apt)
		}
		if c.install && !strings.Contains(string(apt), "install -y -qq --no-install-recommends kcat prometheus systemd npm") {
			t.Errorf("%v: apt-get %q", c.args, apt)
		}
	}
}

// TestMakeInstallsNothingUnasked (issue 27 item 16): make test and make run do not run apt-get or
// npm; make test only reports what is missing (install-deps.sh --check).
func TestMakeInstallsNothingUnasked(t *testing.T) {
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make is not installed")
	}
	for _, target := range []string{"test", "test-short", "run", "learn-cpu"} {
		cmd := exec.Command(mk, "-n", target)
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "apt-get") || strings.Contains(line, "npm ci") ||
				(strings.Contains(line, "install-deps.sh") && !strings.Contains(line, "--check")) {
				t.Errorf("make %s would install: %s", target, line)
			}
		}
	}
}

// TestBuildShowsProgress (issue 27 item 16): build.sh says how many packages it builds, prints
// progress with the elapsed time and a line per binary linked, passes compiler errors through and
// fails with the build.
func TestBuildShowsProgress(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	goBin := fakeBin(t, map[string]string{"go": `case "$1" in
list) for i in 1 2 3 4 5; do echo "p/$i"; done ;;
build) for p in std/a std/b tau2rl/lib/x tau2rl/cmd/tau2-run tau2rl/cmd/tau2-assets; do echo "$p" >&2; done
  if [ -n "$FAIL" ]; then echo "# tau2rl/lib/x" >&2; echo "lib/x/x.go:3:1: syntax error" >&2; exit 1; fi ;;
esac`})
	for _, fail := range []bool{false, true} {
		cmd := exec.Command("bash", filepath.Join(root, "deploy", "scripts", "build.sh"), filepath.Join(t.TempDir(), "bin"), "tau2-run", "tau2-assets", "tau2-nope")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GO="+filepath.Join(goBin, "go"), "BUILD_PROGRESS_EVERY=0")
		if fail {
			cmd.Env = append(cmd.Env, "FAIL=1")
		}
		out, err := cmd.CombinedOutput()
		s := string(out)
		want := []string{"build: 2 binaries into", "(5 packages;", "build: [   1/5]", "std/a", "build: [   4/5]", "linked tau2-run", "linked tau2-assets"}
		if fail {
			want = append(want, "lib/x/x.go:3:1: syntax error", "build: failed after")
			if err == nil {
				t.Errorf("a failed build exited 0:\n%s", s)
			}
		} else {
			want = append(want, "build: done in")
			if err != nil {
				t.Errorf("exit %v:\n%s", err, s)
			}
		}
		for _, w := range want {
			if !strings.Contains(s, w) {
				t.Errorf("fail=%v: output lacks %q:\n%s", fail, w, s)
			}
		}
	}
}
