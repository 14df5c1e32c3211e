package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/cmd/internal/cli"
)

// The testdata configurations: good ones validate, bad ones are refused by
// the parser or by Validate.
func TestConfigFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) < 2 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg := DefaultConfig()
			_, err := cli.Parse([]string{"--config", f}, &cfg)
			if err == nil {
				err = cfg.Config.Validate()
			}
			if good := strings.HasPrefix(filepath.Base(f), "good"); good != (err == nil) {
				t.Fatalf("good=%v, error %v", good, err)
			}
		})
	}
}

// --help lists the keys; --print-config shows where keys come from, never a
// key.
func TestHelpAndPrintConfig(t *testing.T) {
	t.Setenv("TAU2_PROXY_API_KEYS", "sk-secret-value")
	var out bytes.Buffer
	cfg := DefaultConfig()
	app := cli.App{Name: "tau2-proxy", Usage: usage, MetricsAddr: "off"}
	if err := cli.Execute(context.Background(), app, []string{"--help"}, &cfg, &out, nil); err == nil || !strings.Contains(out.String(), "session_ttl") {
		t.Fatalf("help: %v\n%s", err, out.String())
	}
	out.Reset()
	cfg = DefaultConfig()
	if err := cli.Execute(context.Background(), app, []string{"--print-config", "auth.api_keys_file=/etc/keys"}, &cfg, &out, nil); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "api_keys_env: TAU2_PROXY_API_KEYS") || !strings.Contains(s, "/etc/keys") || strings.Contains(s, "sk-secret-value") {
		t.Fatalf("print-config:\n%s", s)
	}
}

// Configuration errors are usage errors (exit status 2), found before
// anything starts.
func TestUsageErrors(t *testing.T) {
	t.Setenv("TAU2_PROXY_API_KEYS", "")
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte("# no keys\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"kafka.brokers=[127.0.0.1:1]"},                                  // no key in $TAU2_PROXY_API_KEYS
		{"kafka.brokers=[127.0.0.1:1]", "auth.api_keys_file=" + keyFile}, // a key file without keys
		{"kafka.brokers=[127.0.0.1:1]", "auth.disabled=true", "max_new_tokens=0"},
		{"kafka.brokers=[]", "auth.disabled=true"},
	} {
		cfg := DefaultConfig()
		err := cli.Execute(context.Background(), cli.App{Name: "tau2-proxy", MetricsAddr: "off"}, args, &cfg, &bytes.Buffer{},
			func(ctx context.Context, rt *cli.Runtime) error { return run(ctx, &cfg, rt) })
		if !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
