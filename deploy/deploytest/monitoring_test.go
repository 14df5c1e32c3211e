package deploytest

import (
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile(repoPath("deploy/monitoring/tau2rl.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("tau2rl.rules.yml: %v", err)
	}
	return rf
}

func promtool(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(needTool(t, "promtool"), args...)
	cmd.Dir = repoPath("deploy/monitoring")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestPromtool validates the scrape config, the rules and the rules' unit
// tests with the promtool of Debian's prometheus package.
func TestPromtool(t *testing.T) {
	t.Run("check config", func(t *testing.T) { promtool(t, "check", "config", "prometheus.yml") })
	t.Run("check rules", func(t *testing.T) { promtool(t, "check", "rules", "tau2rl.rules.yml") })
	t.Run("test rules", func(t *testing.T) { promtool(t, "test", "rules", "tau2rl.rules.test.yml") })
}

// TestEveryAlertTestedAndDocumented requires, for each alert, a promtool test
// case in which it fires, a severity, and a runbook_url whose anchor is a
// heading of docs/OPERATIONS.md.
func TestEveryAlertTestedAndDocumented(t *testing.T) {
	rf := loadRules(t)
	b, err := os.ReadFile(repoPath("deploy/monitoring/tau2rl.rules.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tf); err != nil {
		t.Fatalf("tau2rl.rules.test.yml: %v", err)
	}
	fires := map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	ops, err := os.ReadFile(repoPath("docs/OPERATIONS.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(ops))
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] {
				t.Errorf("alert %s has no promtool test case in which it fires", r.Alert)
			}
			if sev := r.Labels["severity"]; sev != "warning" && sev != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, sev)
			}
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[k] == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, k)
				}
			}
			doc, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "#")
			if doc != "docs/OPERATIONS.md" || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q is not a heading of docs/OPERATIONS.md", r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts in tau2rl.rules.yml")
	}
}

// markdownAnchors returns GitHub's anchors for the headings of a Markdown
// document: lower case, punctuation dropped, spaces to hyphens.
func markdownAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")
		out[a] = true
	}
	return out
}

// recordedNames are the recording rules the rule file defines.
func recordedNames(rf ruleFile) map[string]bool {
	out := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out[r.Record] = true
			}
		}
	}
	return out
}

// prometheusOwn are series Prometheus itself produces for every target.
var prometheusOwn = map[string]bool{"up": true, "scrape_duration_seconds": true}

var codeMetrics *CodeMetrics

func scanCode(t *testing.T) *CodeMetrics {
	t.Helper()
	if codeMetrics == nil {
		cm, err := ScanCodeMetrics(root)
		if err != nil {
			t.Fatal(err)
		}
		codeMetrics = cm
	}
	return codeMetrics
}

// checkExprMetrics fails for each metric in expr that neither the rule file
// records nor the Go code registers.
func checkExprMetrics(t *testing.T, where, expr string, recorded map[string]bool, cm *CodeMetrics) {
	t.Helper()
	names := PromQLMetricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: no metric in %q", where, expr)
	}
	for _, name := range names {
		switch {
		case strings.Contains(name, ":"):
			if !recorded[name] {
				t.Errorf("%s: recording rule %s is not defined in tau2rl.rules.yml", where, name)
			}
		case prometheusOwn[name]:
		case !cm.Has(name):
			t.Errorf("%s: metric %s is not registered anywhere in the Go code", where, name)
		}
	}
}

// TestRuleMetricsExist checks every metric the rules query against the code.
func TestRuleMetricsExist(t *testing.T) {
	rf := loadRules(t)
	recorded := recordedNames(rf)
	cm := scanCode(t)
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			checkExprMetrics(t, "rule "+r.Record+r.Alert, r.Expr, recorded, cm)
		}
	}
}

// TestPromQLMetricNames pins the extraction the metric checks rely on.
func TestPromQLMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`up{job=~"tau2-(producer|trainer)"} == 0`, []string{"up"}},
		{`sum by (group, topic) (tau2rl_kafka_consumer_lag)`, []string{"tau2rl_kafka_consumer_lag"}},
		{`histogram_quantile(0.5, sum by (le) (rate(tau2rl_trainer_step_seconds_bucket[30m])))`, []string{"tau2rl_trainer_step_seconds_bucket"}},
		{`tau2:consumer_lag:sum > 1000 and deriv(tau2:consumer_lag:sum[15m]) > 0`, []string{"tau2:consumer_lag:sum"}},
		{`6 * $model_params * sum(a_b * c) / ($peak_tflops * 1e12 * ${gpus})`, []string{"a_b", "c"}},
		{`x{topic="and or unless"} unless on() y offset 5m`, []string{"x", "y"}},
	}
	for _, tc := range tests {
		if got := PromQLMetricNames(tc.expr); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("PromQLMetricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
	cm := scanCode(t)
	if !cm.Has("tau2rl_trainer_step_seconds_bucket") || !cm.Has("tau2rl_kafka_consumer_lag") {
		t.Error("the code scan misses metrics registered by the trainer and the Kafka transport")
	}
	if cm.Has("tau2rl_trainer_no_such_metric") {
		t.Error("the code scan accepts a metric nobody registers")
	}
}

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID          int    `json:"id"`
		Type        string `json:"type"`
		Title       string `json:"title"`
		Description string `json:"description"`
		GridPos     struct {
			X, Y, W, H int
		} `json:"gridPos"`
		Datasource struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestGrafanaDashboard checks the dashboard JSON: it parses, has the panels
// issue 7 asks for, queries only metrics the code registers (or recording
// rules) and only template variables it defines.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(repoPath("deploy/monitoring/grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("grafana-dashboard.json is not valid JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard needs a uid and a title")
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] {
		t.Errorf("no datasource template variable: the dashboard would be tied to one Prometheus")
	}
	recorded := recordedNames(loadRules(t))
	cm := scanCode(t)
	ids := map[int]bool{}
	var titles []string
	varRef := regexp.MustCompile(`\$\{?(\w+)\}?`)
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if p.Description == "" {
			t.Errorf("panel %q has no description", p.Title)
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %q, want ${datasource}", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			checkExprMetrics(t, "panel "+p.Title, tg.Expr, recorded, cm)
			for _, m := range varRef.FindAllStringSubmatch(tg.Expr+" "+p.Description, -1) {
				if !vars[m[1]] {
					t.Errorf("panel %q uses $%s, which the dashboard does not define", p.Title, m[1])
				}
			}
		}
	}
	sort.Strings(titles)
	for _, want := range []string{"Reward per domain vs policy version", "Episodes/s", "Tokens/s", "lag", "Tree token ratio", "MFU",
		// The GPU roles (issue 33): the samplers and the capture proxy.
		"Sampler tokens/s", "Sampler KV cache use", "prefix cache hit rate", "Sampler queue", "Weight version per sampler",
		"Proxy sessions", "Proxy overhead"} {
		found := false
		for _, title := range titles {
			if strings.Contains(strings.ToLower(title), strings.ToLower(want)) {
				found = true
			}
		}
		if !found {
			t.Errorf("no panel for %q (panels: %q)", want, titles)
		}
	}
}
