package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type portConfig struct {
	Listen string `yaml:"listen"`
}

// TestPrintConfigShowsProcessKeys: --print-config shows the effective
// metrics_addr, log_level and log_format, wherever they came from (the
// binary's default, the --config file, key=value or a flag). Found from
// outside: the one-host layouts give each sampler instance its own
// metrics_addr in its YAML (docs/OPERATIONS.md: 9430 + GPU), and
// `tau2-sampler --config sampler-1.yaml --print-config` printed no
// metrics_addr at all, so the port could not be checked the documented way.
// The printed file loads back to the same values. A flag beats the file's
// key: `tau2-broker --config broker.yaml --metrics-addr 127.0.0.1:19999`
// served metrics on the file's 127.0.0.1:9400.
func TestPrintConfigShowsProcessKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("listen: 127.0.0.1:30001\nmetrics_addr: \":9431\"\nlog_format: json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	app := App{Name: "t", MetricsAddr: "127.0.0.1:9411"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"defaults", nil, []string{"metrics_addr: 127.0.0.1:9411", "log_level: info", "log_format: text"}},
		{"from the file", []string{"--config", file}, []string{"metrics_addr: :9431", "log_level: info", "log_format: json", "listen: 127.0.0.1:30001"}},
		{"flags win", []string{"--config", file, "--metrics-addr", "off", "--log-level", "debug"}, []string{"metrics_addr: \"off\"", "log_level: debug", "log_format: json"}},
		{"key=value", []string{"metrics_addr=127.0.0.1:9500"}, []string{"metrics_addr: 127.0.0.1:9500"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg portConfig
			var out bytes.Buffer
			if err := Execute(context.Background(), app, append([]string{"--print-config"}, tc.args...), &cfg, &out, nil); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w+"\n") {
					t.Errorf("--print-config lacks %q:\n%s", w, out.String())
				}
			}
			// Round trip: the printed configuration, loaded back, prints the same.
			back := filepath.Join(dir, "back.yaml")
			if err := os.WriteFile(back, out.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			var cfg2 portConfig
			var out2 bytes.Buffer
			if err := Execute(context.Background(), app, []string{"--print-config", "--config", back}, &cfg2, &out2, nil); err != nil {
				t.Fatalf("the printed configuration does not load: %v\n%s", err, out.String())
			}
			if out2.String() != out.String() {
				t.Errorf("round trip changed the configuration:\n%s\nthen\n%s", out.String(), out2.String())
			}
		})
	}
}
