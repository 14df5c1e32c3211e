package deploytest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The one-host GPU layouts: deploy/systemd/examples/<name>/ holds a drop-in for tau2rl.target
// (the units the host runs) and drop-ins for the units' placement and start order;
// deploy/config/<name>/ holds the units' configs (sampler-N.yaml for tau2-sampler@N, <role>.yaml
// for the others). TestExampleConfigs loads the configs through the binaries; the tests here
// check that the pieces agree with each other and that systemd accepts them.
var layouts = []string{"one-host-4gpu", "one-host-1gpu"}

// layoutConfig is what the layout checks read from one config file.
type layoutConfig struct {
	MetricsAddr   string `yaml:"metrics_addr"`
	Listen        string `yaml:"listen"`
	CheckpointDir string `yaml:"checkpoint_dir"`
	KV            struct {
		MemoryFraction float64 `yaml:"memory_fraction"`
	} `yaml:"kv"`
	Checkpoint struct {
		Dir string `yaml:"dir"`
	} `yaml:"checkpoint"`
	Policy struct {
		Endpoints []endpointEntry `yaml:"endpoints"`
	} `yaml:"policy"`
	Reload struct {
		Backend   string          `yaml:"backend"`
		Endpoints []endpointEntry `yaml:"endpoints"`
	} `yaml:"reload"`
}

// endpointEntry is an endpoint as the configs write it: a bare URL or a mapping with base_url.
type endpointEntry string

func (e *endpointEntry) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*e = endpointEntry(n.Value)
		return nil
	}
	var m struct {
		BaseURL string `yaml:"base_url"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	*e = endpointEntry(m.BaseURL)
	return nil
}

// layout is one layout, parsed: configs by file name, units (base file merged with the layout's
// drop-ins) by instance name, and the units tau2rl.target wants.
type layout struct {
	name    string
	configs map[string]layoutConfig
	units   map[string]unitFile
	wants   []string
}

func loadLayout(t *testing.T, name string) *layout {
	t.Helper()
	l := &layout{name: name, configs: map[string]layoutConfig{}, units: map[string]unitFile{}}
	files, err := filepath.Glob(repoPath("deploy/config/" + name + "/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs in deploy/config/%s (%v)", name, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c layoutConfig
		if err := yaml.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		l.configs[filepath.Base(f)] = c
	}
	target, err := parseUnit(repoPath("deploy/systemd/examples/" + name + "/tau2rl.target.d/layout.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range target["Unit"]["Wants"] {
		l.wants = append(l.wants, strings.Fields(w)...)
	}
	for _, inst := range l.wants {
		u, err := parseUnit(repoPath("deploy/systemd/" + templateOf(inst)))
		if err != nil {
			t.Fatalf("%s wants %s: %v", name, inst, err)
		}
		dropins, _ := filepath.Glob(repoPath("deploy/systemd/examples/" + name + "/" + templateOf(inst) + ".d/*.conf"))
		for _, d := range dropins {
			du, err := parseUnit(d)
			if err != nil {
				t.Fatal(err)
			}
			mergeUnit(u, du)
		}
		l.units[inst] = u
	}
	return l
}

// templateOf maps an instance name to its unit file: tau2-sampler@0.service → tau2-sampler@.service.
func templateOf(inst string) string {
	if at := strings.IndexByte(inst, '@'); at >= 0 {
		return inst[:at+1] + inst[strings.LastIndexByte(inst, '.'):]
	}
	return inst
}

// instanceOf is the instance part of a unit name ("" for a plain unit).
func instanceOf(unit string) string {
	at := strings.IndexByte(unit, '@')
	if at < 0 {
		return ""
	}
	return unit[at+1 : strings.LastIndexByte(unit, '.')]
}

// mergeUnit applies a drop-in to u as systemd does: list settings append, an empty one resets.
func mergeUnit(u, drop unitFile) {
	for sec, kv := range drop {
		if u[sec] == nil {
			u[sec] = map[string][]string{}
		}
		for k, vs := range kv {
			if len(vs) == 1 && vs[0] == "" {
				u[sec][k] = nil
				continue
			}
			u[sec][k] = append(u[sec][k], vs...)
		}
	}
}

// unitEnv returns the Environment= assignments of u with %i expanded.
func unitEnv(u unitFile, instance string) map[string]string {
	env := map[string]string{}
	for _, line := range u["Service"]["Environment"] {
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = strings.ReplaceAll(v, "%i", instance)
			}
		}
	}
	return env
}

// startsAfter reports whether a is ordered after b through the After= chains of the layout.
func (l *layout) startsAfter(a, b string) bool {
	seen := map[string]bool{}
	var walk func(u string) bool
	walk = func(u string) bool {
		if seen[u] {
			return false
		}
		seen[u] = true
		uf := l.units[u]
		for _, line := range uf["Unit"]["After"] {
			for _, dep := range strings.Fields(line) {
				if dep == b || (l.units[dep] != nil && walk(dep)) {
					return true
				}
			}
		}
		return false
	}
	return walk(a)
}

// roleConfig is the config file a unit instance reads in the layout.
func roleConfig(unit string) string {
	role := strings.TrimPrefix(strings.TrimSuffix(templateOf(unit), ".service"), "tau2-")
	role = strings.TrimSuffix(role, "@")
	if role == "sampler" {
		return "sampler-" + instanceOf(unit) + ".yaml"
	}
	return role + ".yaml"
}

// check returns every disagreement within the layout.
func (l *layout) check() []string {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	var samplers []string
	byRole := map[string][]string{}
	for _, u := range l.wants {
		role := strings.TrimSuffix(strings.TrimPrefix(templateOf(u), "tau2-"), ".service")
		byRole[strings.TrimSuffix(role, "@")] = append(byRole[strings.TrimSuffix(role, "@")], u)
		if _, ok := l.configs[roleConfig(u)]; !ok {
			bad("tau2rl.target wants %s but deploy/config/%s has no %s", u, l.name, roleConfig(u))
		}
	}
	samplers = byRole["sampler"]
	for f := range l.configs {
		if strings.HasPrefix(f, "sampler-") && !slices.Contains(samplers, "tau2-sampler@"+strings.TrimSuffix(strings.TrimPrefix(f, "sampler-"), ".yaml")+".service") {
			bad("%s has no tau2-sampler instance in tau2rl.target's Wants=", f)
		}
	}
	if len(samplers) == 0 || len(byRole["trainer"]) != 1 || len(byRole["producer"]) == 0 || len(byRole["archiver"]) != 1 {
		bad("tau2rl.target wants %v: want samplers, one trainer, producers and one archiver", l.wants)
		return errs
	}
	trainer := byRole["trainer"][0]

	// Endpoints: every caller of the policy lists exactly the samplers; the trainer reloads them
	// from the directory they start from.
	var urls []string
	for _, s := range samplers {
		urls = append(urls, "http://"+l.configs[roleConfig(s)].Listen)
	}
	sort.Strings(urls)
	sameSet := func(what string, eps []endpointEntry) {
		got := make([]string, len(eps))
		for i, e := range eps {
			got[i] = strings.TrimSuffix(string(e), "/")
		}
		sort.Strings(got)
		if !slices.Equal(got, urls) {
			bad("%s = %v, want the samplers %v", what, got, urls)
		}
	}
	tc := l.configs["trainer.yaml"]
	sameSet("trainer.yaml reload.endpoints", tc.Reload.Endpoints)
	if tc.Reload.Backend != "sglang" {
		bad("trainer.yaml reload.backend = %q, want sglang (tau2-sampler's reload API)", tc.Reload.Backend)
	}
	for _, caller := range append(byRole["producer"], byRole["proxy"]...) {
		sameSet(roleConfig(caller)+" policy.endpoints", l.configs[roleConfig(caller)].Policy.Endpoints)
	}
	for _, s := range samplers {
		if d := l.configs[roleConfig(s)].CheckpointDir; d == "" || d != tc.Checkpoint.Dir {
			bad("%s checkpoint_dir = %q, want the trainer's checkpoint.dir %q", roleConfig(s), d, tc.Checkpoint.Dir)
		}
	}

	// Ports: no two roles on the host share a metrics or listen port.
	ports := map[string]string{}
	for f, c := range l.configs {
		for _, addr := range []string{c.MetricsAddr, c.Listen} {
			if addr == "" {
				continue
			}
			_, p, err := net.SplitHostPort(addr)
			if err != nil {
				bad("%s: address %q: %v", f, addr, err)
				continue
			}
			if other, dup := ports[p]; dup {
				bad("port %s used by both %s and %s", p, other, f)
			}
			ports[p] = f
		}
	}

	// GPUs: each sampler sees the GPU its instance names; the trainer's CUDA_VISIBLE_DEVICES comes
	// from the layout's drop-in. A GPU shared with the trainer leaves the trainer the larger part.
	gpus := map[string]string{}
	for _, s := range samplers {
		g := unitEnv(l.units[s], instanceOf(s))["CUDA_VISIBLE_DEVICES"]
		if g != instanceOf(s) {
			bad("%s: CUDA_VISIBLE_DEVICES=%q, want its instance %q", s, g, instanceOf(s))
		}
		if other, dup := gpus[g]; dup {
			bad("GPU %s given to both %s and %s", g, other, s)
		}
		gpus[g] = s
	}
	tg := unitEnv(l.units[trainer], "")["CUDA_VISIBLE_DEVICES"]
	if tg == "" {
		bad("the layout's tau2-trainer drop-in sets no CUDA_VISIBLE_DEVICES")
	}
	for _, g := range strings.Split(tg, ",") {
		if s, shared := gpus[g]; shared {
			if f := l.configs[roleConfig(s)].KV.MemoryFraction; !(f > 0 && f < 0.5) {
				bad("%s shares GPU %s with the trainer but kv.memory_fraction is %v: want < 0.5", s, g, f)
			}
		}
	}

	// Start order: Kafka → samplers → trainer → producers, archiver, proxy.
	order := func(later, earlier string) {
		if !l.startsAfter(later, earlier) {
			bad("%s is not ordered after %s (After=)", later, earlier)
		}
	}
	for _, s := range samplers {
		order(s, "tau2-broker.service")
		order(trainer, s)
	}
	for _, u := range append(append(byRole["producer"], byRole["archiver"]...), byRole["proxy"]...) {
		order(u, trainer)
	}
	return errs
}

// TestOneHostLayouts checks each layout's pieces against each other: the target wants a config
// for each unit, the producers, the proxy and the trainer's reloader list exactly the samplers,
// the samplers start from the trainer's checkpoint directory, ports and GPUs do not collide, and
// the After= chains give the documented start order. A layout with one of those broken is
// reported (the mutations below).
func TestOneHostLayouts(t *testing.T) {
	for _, name := range layouts {
		t.Run(name, func(t *testing.T) {
			l := loadLayout(t, name)
			for _, e := range l.check() {
				t.Error(e)
			}
		})
	}
	mutations := []struct {
		name   string
		mutate func(l *layout)
		want   string
	}{
		{"producer misses a sampler", func(l *layout) {
			c := l.configs["producer.yaml"]
			c.Policy.Endpoints = c.Policy.Endpoints[1:]
			l.configs["producer.yaml"] = c
		}, "producer.yaml policy.endpoints"},
		{"trainer not after the samplers", func(l *layout) {
			l.units["tau2-trainer.service"]["Unit"]["After"] = []string{"network-online.target"}
		}, "tau2-trainer.service is not ordered after tau2-sampler@0.service"},
		{"sampler on another checkpoint dir", func(l *layout) {
			c := l.configs["sampler-0.yaml"]
			c.CheckpointDir = "/elsewhere"
			l.configs["sampler-0.yaml"] = c
		}, "sampler-0.yaml checkpoint_dir"},
		{"port clash", func(l *layout) {
			c := l.configs["producer.yaml"]
			c.MetricsAddr = l.configs["sampler-0.yaml"].MetricsAddr
			l.configs["producer.yaml"] = c
		}, "used by both"},
		{"trainer on a sampler's GPU", func(l *layout) {
			l.units["tau2-trainer.service"]["Service"]["Environment"] = []string{"CUDA_VISIBLE_DEVICES=1"}
		}, "shares GPU 1 with the trainer"},
	}
	for _, m := range mutations {
		t.Run("mutated/"+m.name, func(t *testing.T) {
			l := loadLayout(t, "one-host-4gpu")
			m.mutate(l)
			errs := l.check()
			if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, m.want) }) {
				t.Errorf("not reported (want %q); findings: %q", m.want, errs)
			}
		})
	}
}

// TestOneHostLayoutsVerify installs each layout's drop-ins over the staged units and runs
// systemd-analyze verify on tau2rl.target and every unit it wants.
func TestOneHostLayoutsVerify(t *testing.T) {
	dest := stage(t)
	for _, name := range layouts {
		t.Run(name, func(t *testing.T) {
			etc := filepath.Join(dest, "etc/systemd/system")
			dirs, err := filepath.Glob(repoPath("deploy/systemd/examples/" + name + "/*.d"))
			if err != nil || len(dirs) == 0 {
				t.Fatalf("no drop-ins for %s (%v)", name, err)
			}
			for _, d := range dirs {
				target := filepath.Join(etc, filepath.Base(d))
				if err := os.RemoveAll(target); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command("cp", "-R", d, target).CombinedOutput(); err != nil {
					t.Fatalf("install %s: %v\n%s", d, err, out)
				}
				t.Cleanup(func() { os.RemoveAll(target) })
			}
			l := loadLayout(t, name)
			if out, err := verify(dest, append([]string{"tau2rl.target"}, l.wants...)...); err != nil {
				t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
			}
		})
	}
}

// TestScrapeConfigGPURoles: prometheus.yml scrapes the samplers and the proxy on the metrics
// ports of the four-GPU layout's configs, under the job names the sampler alerts select.
func TestScrapeConfigGPURoles(t *testing.T) {
	ports := scrapePorts(t)
	l := loadLayout(t, "one-host-4gpu")
	sampler := regexp.MustCompile(`^sampler-\d+\.yaml$`)
	n := 0
	for f, c := range l.configs {
		job := ""
		switch {
		case sampler.MatchString(f):
			job = "tau2-sampler"
		case f == "proxy.yaml":
			job = "tau2-proxy"
		default:
			continue
		}
		n++
		_, p, err := net.SplitHostPort(c.MetricsAddr)
		if err != nil {
			t.Errorf("%s: metrics_addr %q: %v", f, c.MetricsAddr, err)
			continue
		}
		if _, err := strconv.Atoi(p); err != nil || !ports[job][p] {
			t.Errorf("prometheus.yml job %s does not scrape port %s, where %s serves metrics", job, p, f)
		}
	}
	if n < 2 {
		t.Fatalf("the four-GPU layout has no sampler or proxy config")
	}
}
