package deploytest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// configBinary maps an example config's file name to the command that reads it.
var configBinary = map[string][]string{
	"producer.yaml":     {"tau2-producer"},
	"trainer.yaml":      {"tau2-trainer"},
	"archiver.yaml":     {"tau2-archiver"},
	"replay.yaml":       {"tau2-replay"},
	"eval.yaml":         {"tau2-eval", "run"},
	"broker.yaml":       {"tau2-broker"},
	"scripted-llm.yaml": {"tau2-scripted-llm"},
	"sampler.yaml":      {"tau2-sampler"},
	"proxy.yaml":        {"tau2-proxy"},
}

// binaryFor returns the command that reads an example config: by its file name, or for a
// template unit's per-instance file (sampler-0.yaml for tau2-sampler@0) by the name before the
// instance.
func binaryFor(file string) ([]string, bool) {
	if c, ok := configBinary[file]; ok {
		return c, true
	}
	stem, ext := strings.TrimSuffix(file, ".yaml"), ".yaml"
	if i := strings.LastIndexByte(stem, '-'); i > 0 {
		c, ok := configBinary[stem[:i]+ext]
		return c, ok
	}
	return nil, false
}

// cliKeys are consumed by cmd/internal/cli and never printed by --print-config.
var cliKeys = map[string]bool{"metrics_addr": true, "log_level": true, "log_format": true}

func exampleConfigs(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoPath("deploy/config"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			out = append(out, p)
		}
		return err
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("no example configs under deploy/config (%v)", err)
	}
	sort.Strings(out)
	return out
}

// TestExampleConfigs loads every example config through the real binary's
// --print-config (strict: an unknown key is an error), checks that each value
// set in the file is the value the binary ends up with, and that every key is
// documented by a comment.
func TestExampleConfigs(t *testing.T) {
	needBinaries(t, allBinaries...)
	for _, path := range exampleConfigs(t) {
		rel, _ := filepath.Rel(repoPath("deploy/config"), path)
		t.Run(rel, func(t *testing.T) {
			cmdArgs, ok := binaryFor(filepath.Base(path))
			if !ok {
				t.Fatalf("no binary known for %s: name it after its role (%v)", rel, keys(configBinary))
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			args := append(append([]string{}, cmdArgs[1:]...), "--config", path, "--print-config")
			cmd := exec.Command(bins.Path(cmdArgs[0]), args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s %s: %v\n%s", cmdArgs[0], strings.Join(args, " "), err, stderr.String())
			}
			var want, got any
			if err := yaml.Unmarshal(src, &want); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("--print-config output: %v", err)
			}
			wm, ok := want.(map[string]any)
			if !ok {
				t.Fatalf("%s: top level is not a mapping", rel)
			}
			for k := range cliKeys {
				delete(wm, k)
			}
			for _, d := range diffValues("", wm, got) {
				t.Error(d)
			}
			var doc yaml.Node
			if err := yaml.Unmarshal(src, &doc); err != nil {
				t.Fatal(err)
			}
			for _, k := range uncommentedKeys(&doc, "") {
				t.Errorf("key %s has no comment", k)
			}
		})
	}
}

// diffValues reports where got does not hold the values of want. Scalars
// compare as durations or numbers when both parse as such, so "600s" equals
// "10m0s" and 1.7e-5 equals 1.7e-05. A string in a list where the binary
// prints a mapping with base_url is the endpoint shorthand (a bare URL).
func diffValues(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: the binary has %v, not a mapping", path, got)}
		}
		var out []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s%s: not in the effective config", path, k))
				continue
			}
			out = append(out, diffValues(path+k+".", wv, gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %v, the binary has %v", strings.TrimSuffix(path, "."), want, got)}
		}
		var out []string
		for i := range w {
			out = append(out, diffValues(fmt.Sprintf("%s%d.", path, i), w[i], g[i])...)
		}
		return out
	default:
		if m, ok := got.(map[string]any); ok {
			if s, isStr := want.(string); isStr && fmt.Sprint(m["base_url"]) == s {
				return nil
			}
		}
		if !sameScalar(want, got) {
			return []string{fmt.Sprintf("%s: want %v, the binary has %v", strings.TrimSuffix(path, "."), want, got)}
		}
		return nil
	}
}

func sameScalar(a, b any) bool {
	as, bs := fmt.Sprint(a), fmt.Sprint(b)
	if as == bs {
		return true
	}
	if ad, err := time.ParseDuration(as); err == nil {
		if bd, err := time.ParseDuration(bs); err == nil {
			return ad == bd
		}
	}
	af, err1 := strconv.ParseFloat(as, 64)
	bf, err2 := strconv.ParseFloat(bs, 64)
	return err1 == nil && err2 == nil && af == bf
}

// uncommentedKeys lists the mapping keys without a head or line comment.
// Keys inside list items are described by their list's comment.
func uncommentedKeys(n *yaml.Node, path string) []string {
	var out []string
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			out = append(out, uncommentedKeys(c, path)...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.HeadComment == "" && k.LineComment == "" && v.LineComment == "" {
				out = append(out, path+k.Value)
			}
			if v.Kind == yaml.MappingNode {
				out = append(out, uncommentedKeys(v, path+k.Value+".")...)
			}
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// scrapePorts reads deploy/monitoring/prometheus.yml: each scrape job's target ports.
func scrapePorts(t *testing.T) map[string]map[string]bool {
	t.Helper()
	b, err := os.ReadFile(repoPath("deploy/monitoring/prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &pc); err != nil {
		t.Fatal(err)
	}
	ports := map[string]map[string]bool{}
	for _, sc := range pc.ScrapeConfigs {
		ports[sc.JobName] = map[string]bool{}
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				if _, p, err := net.SplitHostPort(tg); err == nil {
					ports[sc.JobName][p] = true
				}
			}
		}
	}
	return ports
}

// TestScrapeConfigMatchesExamples checks that prometheus.yml scrapes each
// role on the port its multi-node example config serves metrics on.
func TestScrapeConfigMatchesExamples(t *testing.T) {
	ports := scrapePorts(t)
	for file, job := range map[string]string{"producer.yaml": "tau2-producer", "trainer.yaml": "tau2-trainer", "archiver.yaml": "tau2-archiver", "replay.yaml": "tau2-replay"} {
		src, err := os.ReadFile(repoPath("deploy/config/qwen3-8b-multi-node/" + file))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			MetricsAddr string `yaml:"metrics_addr"`
		}
		if err := yaml.Unmarshal(src, &c); err != nil {
			t.Fatal(err)
		}
		_, p, err := net.SplitHostPort(c.MetricsAddr)
		if err != nil {
			t.Errorf("%s: metrics_addr %q: %v", file, c.MetricsAddr, err)
			continue
		}
		if !ports[job][p] {
			t.Errorf("prometheus.yml job %s does not scrape port %s, where %s serves metrics", job, p, file)
		}
	}
}

// TestDefaultMetricsAddrsDistinct: every binary's default metrics address (what --print-config
// prints with no config) differs from every other's, so roles started side by side with their
// defaults on one host — as `make run` and the one-host layouts do — never fight over a port.
// tau2-sampler's default was once tau2-producer@1's documented :9411.
func TestDefaultMetricsAddrsDistinct(t *testing.T) {
	needBinaries(t, allBinaries...)
	seen := map[string]string{}
	for _, b := range allBinaries {
		args := []string{"--print-config"}
		if c, ok := configBinary[strings.TrimPrefix(b, "tau2-")+".yaml"]; ok {
			args = append(append([]string{}, c[1:]...), args...)
		}
		out, err := exec.Command(bins.Path(b), args...).Output()
		if err != nil {
			t.Fatalf("%s %v: %v", b, args, err)
		}
		var cfg struct {
			MetricsAddr string `yaml:"metrics_addr"`
		}
		if err := yaml.Unmarshal(out, &cfg); err != nil || cfg.MetricsAddr == "" {
			t.Fatalf("%s --print-config: no metrics_addr (%v)\n%s", b, err, out)
		}
		if cfg.MetricsAddr == "off" { // a batch command (tau2-eval) serves no metrics by default
			continue
		}
		_, port, err := net.SplitHostPort(cfg.MetricsAddr)
		if err != nil {
			t.Fatalf("%s: metrics_addr %q: %v", b, cfg.MetricsAddr, err)
		}
		if other, dup := seen[port]; dup {
			t.Errorf("%s and %s both default to metrics port %s", other, b, port)
		}
		seen[port] = b
		if b == "tau2-producer" { // its template's instances take the next ports (docs/OPERATIONS.md)
			seen[strconv.Itoa(atoi(t, port)+1)] = "tau2-producer@1"
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
