package embedded_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// self is this package's import path.
const self = "tau2rl/lib/stream/embedded"

// mayLink are the only commands that may link the development broker: the broker binary and the
// dev runner. Every other binary talks to a broker address (kafka.brokers), so a production
// build cannot start an unreplicated in-process broker by configuration.
var mayLink = []string{"tau2rl/cmd/tau2-broker", "tau2rl/cmd/tau2-run"}

// goPackage is the part of `go list -json` this test reads.
type goPackage struct {
	ImportPath, Name string
	Imports, Deps    []string
}

// listPackages runs `go list -json` over the module with the given build tags.
func listPackages(t *testing.T, tags string) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-tags", tags, "-json=ImportPath,Name,Imports,Deps", "tau2rl/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -tags %q: %v\n%s", tags, err, stderr.String())
	}
	var pkgs []goPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestOnlyBrokerAndRunnerLinkIt: no binary other than tau2-broker and tau2-run links this
// package (directly or through a library), and no library imports it except test-support
// packages (named *test, linked only into tests), in the default build and the cuda build.
func TestOnlyBrokerAndRunnerLinkIt(t *testing.T) {
	for _, tags := range []string{"", "cuda"} {
		pkgs := listPackages(t, tags)
		mains := 0
		for _, p := range pkgs {
			switch {
			case p.Name == "main":
				mains++
				if slices.Contains(p.Deps, self) && !slices.Contains(mayLink, p.ImportPath) {
					t.Errorf("tags %q: %s links %s; only %v may (point the binary at kafka.brokers instead)",
						tags, p.ImportPath, self, mayLink)
				}
			case slices.Contains(p.Imports, self) && !strings.HasSuffix(p.Name, "test"):
				t.Errorf("tags %q: library %s imports %s; only binaries in %v and tests may", tags, p.ImportPath, self, mayLink)
			}
		}
		// The walk is real: the module has a dozen commands and tau2-broker links this package.
		if mains < 10 {
			t.Fatalf("tags %q: go list found %d commands", tags, mains)
		}
		broker := slices.IndexFunc(pkgs, func(p goPackage) bool { return p.ImportPath == mayLink[0] })
		if broker < 0 || !slices.Contains(pkgs[broker].Deps, self) {
			t.Fatalf("tags %q: %s not listed or not linking %s: the check reads the wrong field", tags, mayLink[0], self)
		}
	}
}
