package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"tau2rl/lib/required"
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

type secretConfig struct {
	Endpoint struct {
		BaseURL   string `yaml:"base_url"`
		APIKey    string `yaml:"api_key"`
		APIKeyEnv string `yaml:"api_key_env"`
	} `yaml:"endpoint"`
	SASL struct {
		Username string `yaml:"username"`
		Password string `yaml:"password"`
	} `yaml:"sasl"`
	Extra     map[string]any `yaml:"extra"`
	MaxTokens int            `yaml:"max_tokens"`
	Steps     int            `yaml:"steps"`
}

func (c *secretConfig) Validate() error {
	if c.Steps < 0 {
		return errors.New("steps: must be ≥ 0")
	}
	return nil
}

// TestPrintConfigRedactsSecrets: --print-config masks secret-named fields and credentials
// recognised in any value, and keeps everything else.
func TestPrintConfigRedactsSecrets(t *testing.T) {
	var cfg secretConfig
	var out bytes.Buffer
	err := Execute(context.Background(), App{Name: "t"}, []string{"--print-config",
		"endpoint.api_key=opaque-inline-key", "endpoint.api_key_env=OPENAI_API_KEY",
		"endpoint.base_url=https://user:hunter22@proxy/v1", "sasl.username=alice", "sasl.password=hunter33",
		"extra={headers: {Authorization: Bearer sk-abcdefghijklmnopqrstuvwx}, token: t0k3n}", "max_tokens=5"}, &cfg, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"opaque-inline-key", "hunter22", "hunter33", "abcdefghijklmnop", "t0k3n"} {
		if strings.Contains(out.String(), leak) {
			t.Errorf("--print-config shows %q:\n%s", leak, out.String())
		}
	}
	for _, kept := range []string{"api_key_env: OPENAI_API_KEY", "username: alice", "max_tokens: 5", "proxy/v1", "api_key: '[REDACTED]'"} {
		if !strings.Contains(out.String(), kept) {
			t.Errorf("--print-config lacks %q:\n%s", kept, out.String())
		}
	}
}

// TestConfigErrorsExitTwo: every kind of configuration error — a flag, an override, a --config
// file that is missing, malformed or has an unknown key, a value that fails Validate — is a usage
// error (exit status 2, which systemd units do not restart on), and it is reported before the
// binary's run function (so before any connection).
func TestConfigErrorsExitTwo(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, args := range map[string][]string{
		"unknown flag":      {"--frobnicate"},
		"bad override":      {"steps=many"},
		"missing file":      {"--config", filepath.Join(dir, "nope.yaml")},
		"malformed file":    {"--config", write("bad.yaml", "steps: [\n")},
		"unknown file key":  {"--config", write("typo.yaml", "stpes: 3\n")},
		"invalid file key":  {"--config", write("neg.yaml", "steps: -1\n")},
		"invalid override":  {"steps=-1"},
		"invalid, printing": {"--print-config", "steps=-1"},
	} {
		t.Run(name, func(t *testing.T) {
			var cfg secretConfig
			ran := false
			err := Execute(context.Background(), App{Name: "t"}, args, &cfg, io.Discard, func(context.Context, *Runtime) error {
				ran = true
				return nil
			})
			if code := ExitCode(err); code != 2 {
				t.Errorf("exit %d, want 2 (err %v)", code, err)
			}
			if ran {
				t.Error("run was called with an invalid configuration")
			}
		})
	}
	if code := ExitCode(errors.New("connection refused")); code != 1 {
		t.Errorf("runtime error: exit %d, want 1", code)
	}
	if code := ExitCode(nil); code != 0 {
		t.Errorf("success: exit %d", code)
	}
}

// TestLoggerRedacts: log lines carry upstream errors and URLs; credentials in them are masked.
func TestLoggerRedacts(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var b bytes.Buffer
		log, err := NewLogger(&b, "info", format)
		if err != nil {
			t.Fatal(err)
		}
		log.Warn("upstream said Authorization: Bearer sk-live-0123456789abcdefghij",
			"err", errors.New(`HTTP 401: {"api_key": "opaque-secret-1"}`), "url", "https://bob:hunter22@proxy/v1", "n", 3)
		for _, leak := range []string{"0123456789abcdef", "opaque-secret-1", "hunter22"} {
			if strings.Contains(b.String(), leak) {
				t.Errorf("%s log shows %q: %s", format, leak, b.String())
			}
		}
		if !strings.Contains(b.String(), "[REDACTED]") || !strings.Contains(b.String(), "proxy/v1") {
			t.Errorf("%s log lost its context: %s", format, b.String())
		}
	}
}

// needsConfig has one key a user must set (dataset) and one with a checked default (rate), and
// says where its data would come from (ConfigNotes).
type needsConfig struct {
	Dataset string  `yaml:"dataset"`
	Out     string  `yaml:"out"`
	Rate    float64 `yaml:"rate"`
}

func (c *needsConfig) Validate() error {
	var errs []error
	if c.Dataset == "" {
		errs = append(errs, fmt.Errorf("dataset is %w (the archive to read)", required.ErrMissing))
	}
	if c.Out == "" {
		errs = append(errs, fmt.Errorf("out: %w", required.ErrMissing))
	}
	if c.Rate <= 0 {
		errs = append(errs, fmt.Errorf("rate %v: must be > 0", c.Rate))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("replay: %w", errors.Join(errs...))
}

func (c *needsConfig) ConfigNotes() []string {
	return []string{"tau2-data: /srv/shared/tau2-data (from ../shared)"}
}

// TestPrintConfigListsMissingKeys: `BINARY --print-config` with keys still to set prints the
// effective configuration, lists those keys as comments and exits 0 (a new user's first look at
// the defaults); a wrong value is still exit 2; a run without the keys is still refused.
func TestPrintConfigListsMissingKeys(t *testing.T) {
	noRun := func(context.Context, *Runtime) error { t.Error("run called"); return nil }
	cfg := needsConfig{Rate: 1}
	var out bytes.Buffer
	err := Execute(context.Background(), App{Name: "t"}, []string{"--print-config"}, &cfg, &out, noRun)
	if err != nil {
		t.Fatalf("--print-config with required keys unset: exit %d: %v", ExitCode(err), err)
	}
	for _, want := range []string{"dataset: \"\"", "rate: 1", "# still to set before it runs:",
		"#   replay: dataset is required (the archive to read)", "#   out: required",
		"# found at run time:", "#   tau2-data: /srv/shared/tau2-data (from ../shared)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	var doc map[string]any
	if err := yaml.Unmarshal(out.Bytes(), &doc); err != nil || doc["rate"] != 1 {
		t.Errorf("the output is not the configuration as YAML (%v): %v", err, doc)
	}
	cfg = needsConfig{Rate: 1}
	err = Execute(context.Background(), App{Name: "t"}, []string{"--print-config", "rate=-1"}, &cfg, io.Discard, noRun)
	if ExitCode(err) != 2 || !strings.Contains(err.Error(), "rate -1: must be > 0") {
		t.Errorf("a wrong value beside missing keys: exit %d: %v", ExitCode(err), err)
	}
	cfg = needsConfig{Rate: 1}
	if err := Check([]string{"out=o"}, &cfg); ExitCode(err) != 2 || !strings.Contains(err.Error(), "dataset is required") {
		t.Errorf("Check without dataset: exit %d: %v", ExitCode(err), err)
	}
	cfg = needsConfig{Rate: 1}
	if err := Check([]string{"out=o", "dataset=d"}, &cfg); err != nil {
		t.Errorf("Check of a complete configuration: %v", err)
	}
}
