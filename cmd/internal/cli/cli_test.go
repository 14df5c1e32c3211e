package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type econfig struct {
	Domain string `yaml:"domain"`
}

type testConfig struct {
	Econfig  econfig  `yaml:"econfig"`
	MaxSteps int      `yaml:"max_steps"`
	Rate     float64  `yaml:"rate"`
	Brokers  []string `yaml:"brokers"`
	Solo     bool     `yaml:"solo_mode"`
}

func defaults() testConfig {
	return testConfig{Econfig: econfig{Domain: "telecom"}, MaxSteps: 200, Rate: 1, Brokers: []string{"127.0.0.1:9092"}}
}

func TestParse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("econfig:\n  domain: retail\nmax_steps: 50\nmetrics_addr: 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    testConfig
		wantErr string
	}{
		{name: "defaults", args: nil, want: defaults()},
		{name: "dotted override", args: []string{"econfig.domain=airline"},
			want: func() testConfig { c := defaults(); c.Econfig.Domain = "airline"; return c }()},
		{name: "file then override", args: []string{"--config", file, "max_steps=7"},
			want: func() testConfig { c := defaults(); c.Econfig.Domain = "retail"; c.MaxSteps = 7; return c }()},
		{name: "typed values", args: []string{"rate=0.5", "solo_mode=true", "brokers=[a:1, b:2]"},
			want: func() testConfig {
				c := defaults()
				c.Rate, c.Solo, c.Brokers = 0.5, true, []string{"a:1", "b:2"}
				return c
			}()},
		{name: "later override wins", args: []string{"max_steps=1", "max_steps=2"},
			want: func() testConfig { c := defaults(); c.MaxSteps = 2; return c }()},
		{name: "unknown key", args: []string{"econfig.domian=airline"}, wantErr: "not found"},
		{name: "wrong type", args: []string{"max_steps=many"}, wantErr: "cannot unmarshal"},
		{name: "not key=value", args: []string{"airline"}, wantErr: "not key=value"},
		{name: "unknown flag", args: []string{"--frobnicate"}, wantErr: "unknown flag"},
		{name: "missing file", args: []string{"--config", filepath.Join(dir, "nope.yaml")}, wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaults()
			_, err := Parse(tt.args, &cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := mustYAML(t, cfg), mustYAML(t, tt.want); got != want {
				t.Fatalf("config:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestReservedKeysFromFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("metrics_addr: 127.0.0.1:9999\nlog_level: debug\nmax_steps: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := defaults()
	o, err := Parse([]string{"--config=" + file}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.MetricsAddr == nil || *o.MetricsAddr != "127.0.0.1:9999" || o.LogLevel != "debug" || cfg.MaxSteps != 3 {
		t.Fatalf("options %+v cfg %+v", o, cfg)
	}
}

func TestHelpListsEveryKey(t *testing.T) {
	var out bytes.Buffer
	cfg := defaults()
	err := Execute(context.Background(), App{Name: "t", Usage: "t does things"}, []string{"--help"}, &cfg, &out, nil)
	if !errors.Is(err, errHelp) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"t does things", "domain: telecom", "max_steps: 200", "--config FILE"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestExecuteServesHealthAndMetrics(t *testing.T) {
	cfg := defaults()
	err := Execute(context.Background(), App{Name: "t", MetricsAddr: "127.0.0.1:0"}, nil, &cfg, io.Discard,
		func(ctx context.Context, rt *Runtime) error {
			get := func(path string) int {
				resp, err := http.Get("http://" + rt.MetricsAddr + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if c := get("/healthz"); c != http.StatusServiceUnavailable {
				t.Errorf("healthz before ready = %d", c)
			}
			rt.Ready()
			if c := get("/healthz"); c != http.StatusOK {
				t.Errorf("healthz after ready = %d", c)
			}
			if c := get("/metrics"); c != http.StatusOK {
				t.Errorf("metrics = %d", c)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCanceledRunIsCleanShutdown(t *testing.T) {
	cfg := defaults()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := Execute(ctx, App{Name: "t"}, nil, &cfg, io.Discard, func(ctx context.Context, rt *Runtime) error {
		<-ctx.Done()
		return ctx.Err()
	})
	// A deadline is not a signal: the error surfaces.
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteConfig(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestEmptyOverrideClearsString(t *testing.T) {
	cfg := defaults()
	if _, err := Parse([]string{"econfig.domain="}, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Econfig.Domain != "" {
		t.Fatalf("domain = %q, want empty", cfg.Econfig.Domain)
	}
	if _, err := Parse([]string{"max_steps="}, &cfg); err == nil {
		t.Fatal("an empty value for an int was accepted")
	}
}
