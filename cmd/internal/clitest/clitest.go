// Package clitest checks a binary's configuration type against files in its testdata: every
// binary in cmd/ keeps good and bad example configurations beside its main, and one table test
// per binary loads them through cli exactly as `BINARY --config FILE --print-config` would.
//
// Layout (DIR is usually "testdata/config"):
//
//	DIR/good/*.yaml  must parse and validate, and --print-config must list nothing still to set. Lines "# key: dotted.path = VALUE" name a key of
//	                 the printed effective configuration and its value (e.g. a default the
//	                 file must not reset; list elements by index: policy.endpoints.0.base_url);
//	                 lines "# want: TEXT" text it must contain; lines "# args: k=v …" add key=value overrides after the file
//	                 (split at spaces), "# arg: k=v" one override that may hold spaces.
//	DIR/bad/*.yaml   must fail with a usage error (exit status 2) before the binary would
//	                 start, with an error containing every "# want: TEXT"; "# args:" as above.
//	                 Under --print-config a file that only lacks required keys is printed with
//	                 them listed as comments (exit 0, each "# want:" text among them); any
//	                 other bad file fails there too, with the same error.
//
// A file without a "# want:" line in bad/ is itself an error: every bad example says why.
package clitest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"tau2rl/cmd/internal/cli"
)

// ConfigFiles runs the good and bad example files under dir against fresh configurations from
// newConfig (the binary's defaults, as its main builds them).
func ConfigFiles(t *testing.T, dir string, newConfig func() any) {
	t.Helper()
	good, _ := filepath.Glob(filepath.Join(dir, "good", "*.yaml"))
	bad, _ := filepath.Glob(filepath.Join(dir, "bad", "*.yaml"))
	if len(good) == 0 || len(bad) == 0 {
		t.Fatalf("%s: want good/*.yaml and bad/*.yaml examples, found %d and %d", dir, len(good), len(bad))
	}
	for _, f := range good {
		t.Run("good/"+filepath.Base(f), func(t *testing.T) {
			want, args := directives(t, f)
			if err := cli.Check(append([]string{"--config", f}, args...), newConfig()); err != nil {
				t.Fatalf("a good configuration was rejected (exit %d): %v", cli.ExitCode(err), err)
			}
			out, err := PrintConfig(newConfig(), append([]string{"--config", f}, args...)...)
			if err != nil {
				t.Fatalf("--print-config of a good configuration failed (exit %d): %v", cli.ExitCode(err), err)
			}
			if strings.Contains(out, "# still to set") {
				t.Fatalf("--print-config of a good configuration lists keys still to set:\n%s", out)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("effective configuration lacks %q:\n%s", w, out)
				}
			}
			var doc any
			if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("--print-config output does not parse: %v", err)
			}
			for _, kv := range keys(t, f) {
				path, want, _ := strings.Cut(kv, "=")
				path, want = strings.TrimSpace(path), strings.TrimSpace(want)
				if got, ok := lookup(doc, path); !ok {
					t.Errorf("effective configuration has no %s", path)
				} else if fmt.Sprint(got) != want {
					t.Errorf("%s = %v, want %s", path, got, want)
				}
			}
		})
	}
	for _, f := range bad {
		t.Run("bad/"+filepath.Base(f), func(t *testing.T) {
			want, args := directives(t, f)
			if len(want) == 0 {
				t.Fatalf("%s: a bad example needs a '# want: ERROR TEXT' line", f)
			}
			err := cli.Check(append([]string{"--config", f}, args...), newConfig())
			if err == nil {
				t.Fatal("a bad configuration was accepted")
			}
			if code := cli.ExitCode(err); code != 2 {
				t.Errorf("exit status %d, want 2 (a configuration error): %v", code, err)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			// --print-config prints a configuration that only lacks keys, listing them (exit 0),
			// and refuses a wrong value with the same error (exit 2).
			out, perr := PrintConfig(newConfig(), append([]string{"--config", f}, args...)...)
			switch {
			case perr == nil:
				if !strings.Contains(out, "# still to set before it runs:") {
					t.Errorf("--print-config accepted a bad configuration without listing what is missing:\n%s", out)
				}
				for _, w := range want {
					if !strings.Contains(out, w) {
						t.Errorf("--print-config's list of keys to set lacks %q:\n%s", w, out)
					}
				}
			case cli.ExitCode(perr) != 2 || perr.Error() != err.Error():
				t.Errorf("--print-config: exit %d, %v; want exit 2 and %v", cli.ExitCode(perr), perr, err)
			}
		})
	}
}

// PrintConfig runs `BINARY --print-config ARGS…` on cfg through cli and returns what it printed.
func PrintConfig(cfg any, args ...string) (string, error) {
	var out bytes.Buffer
	err := cli.Execute(context.Background(), cli.App{Name: "clitest", MetricsAddr: "off"},
		append([]string{"--print-config"}, args...), cfg, &out, func(context.Context, *cli.Runtime) error { return nil })
	return out.String(), err
}

// lookup walks a decoded YAML document along a dotted path (list elements by index).
func lookup(doc any, path string) (any, bool) {
	for _, p := range strings.Split(path, ".") {
		switch v := doc.(type) {
		case map[string]any:
			var ok bool
			if doc, ok = v[p]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

func keys(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# key:"); ok {
			out = append(out, v)
		}
	}
	return out
}

func directives(t *testing.T, file string) (want, args []string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if v, ok := strings.CutPrefix(line, "# want:"); ok {
			want = append(want, strings.TrimSpace(v))
		}
		if v, ok := strings.CutPrefix(line, "# args:"); ok {
			args = append(args, strings.Fields(v)...)
		}
		if v, ok := strings.CutPrefix(line, "# arg:"); ok {
			args = append(args, strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return want, args
}

// PrintConfigAlone runs `BINARY --print-config` with no other argument on cfg (the binary's
// defaults): it must succeed (exit 0), print the configuration as YAML, and list each of missing
// among the keys still to set.
func PrintConfigAlone(t *testing.T, cfg any, missing ...string) {
	t.Helper()
	out, err := PrintConfig(cfg)
	if err != nil {
		t.Fatalf("--print-config alone: exit %d: %v", cli.ExitCode(err), err)
	}
	var doc any
	if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("--print-config output does not parse: %v\n%s", err, out)
	}
	_, list, _ := strings.Cut(out, "# still to set before it runs:")
	for _, m := range missing {
		if !strings.Contains(list, m) {
			t.Errorf("--print-config does not list %q as still to set:\n%s", m, out)
		}
	}
	if len(missing) == 0 && list != "" {
		t.Errorf("--print-config lists keys still to set:\n%s", out)
	}
}

// AssetsFromShared checks that a binary finds the τ² data and the Qwen3 tokenizer as every
// binary does (lib/assets, docs/ASSETS.md) when neither $TAU2_DATA_DIR nor $QWEN3_TOKENIZER_DIR
// is set: from ../shared beside a parent of the working directory. It lays out a fresh
// root/shared/{tau2-data,qwen3-tokenizer}, works in root/repo/cmd with downloads off and an empty
// cache, and runs `--print-config ARGS…` on cfg: the configuration must be complete, and its
// notes must say that each of dataKeys resolves to root/shared/tau2-data and each of
// tokenizerKeys to root/shared/qwen3-tokenizer.
func AssetsFromShared(t *testing.T, cfg any, args []string, dataKeys, tokenizerKeys []string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "shared", "tau2-data")
	tok := filepath.Join(root, "shared", "qwen3-tokenizer")
	wd := filepath.Join(root, "repo", "cmd")
	for _, d := range []string{filepath.Join(data, "tau2", "domains"), tok, wd} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tok, "tokenizer.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TAU2_DATA_DIR", "")
	t.Setenv("QWEN3_TOKENIZER_DIR", "")
	t.Setenv("TAU2RL_OFFLINE", "1")
	t.Setenv("TAU2RL_CACHE_DIR", t.TempDir())
	t.Chdir(wd)
	out, err := PrintConfig(cfg, args...)
	if err != nil {
		t.Fatalf("--print-config with the data and tokenizer in ../shared: exit %d: %v", cli.ExitCode(err), err)
	}
	if strings.Contains(out, "# still to set") {
		t.Errorf("the configuration is not complete:\n%s", out)
	}
	for _, k := range dataKeys {
		if want := "#   " + k + " → tau2-data: " + data + " (from ../shared)"; !strings.Contains(out, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, out)
		}
	}
	for _, k := range tokenizerKeys {
		if want := "#   " + k + " → qwen3-tokenizer: " + tok + " (from ../shared)"; !strings.Contains(out, want) {
			t.Errorf("--print-config lacks %q:\n%s", want, out)
		}
	}
}
