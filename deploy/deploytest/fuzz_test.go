package deploytest

import (
	"regexp"
	"strings"
	"testing"
)

// FuzzPromQLMetricNames feeds arbitrary expressions to the metric-name
// extraction: it must not panic, and what it returns must be identifiers
// that are neither keywords nor function calls.
func FuzzPromQLMetricNames(f *testing.F) {
	for _, seed := range []string{
		`sum by (group, topic) (tau2rl_kafka_consumer_lag) > 1000 and deriv(tau2:consumer_lag:sum[15m]) > 0`,
		`histogram_quantile(0.5, sum by (le) (rate(x_bucket{le!="+Inf"}[30m])))`,
		`6 * $model_params * sum(a * b) / (${peak} * 1e12)`,
		`x{a="}"} unless on() y offset 5m`,
		`"unterminated {[(`,
	} {
		f.Add(seed)
	}
	valid := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	f.Fuzz(func(t *testing.T, expr string) {
		for _, name := range PromQLMetricNames(expr) {
			if !valid.MatchString(name) || promqlKeywords[strings.ToLower(name)] {
				t.Fatalf("PromQLMetricNames(%q) returned %q", expr, name)
			}
		}
	})
}

// FuzzParseUnit feeds arbitrary text to the unit-file parser: an error or a
// result, never a panic.
func FuzzParseUnit(f *testing.F) {
	f.Add("[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\nCapabilityBoundingSet=\nCapabilityBoundingSet=CAP_NET_RAW\n")
	f.Add("key-outside-section=1\n")
	f.Add("[Service\n=\n")
	f.Fuzz(func(t *testing.T, text string) {
		path := t.TempDir() + "/u.service"
		if err := writeFile(path, text); err != nil {
			t.Fatal(err)
		}
		u, err := parseUnit(path)
		if err == nil && u == nil {
			t.Fatal("nil unit without an error")
		}
	})
}
