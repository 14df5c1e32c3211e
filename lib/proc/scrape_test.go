package proc_test

import (
	"reflect"
	"strings"
	"testing"

	"tau2rl/lib/proc"
)

const exposition = `# TYPE req_total counter
req_total{outcome="published"} 5
req_total{outcome="failed"} 2
# TYPE in_flight gauge
in_flight 3
# TYPE loose untyped
loose{outcome="published"} 7
# TYPE lat histogram
lat_bucket{outcome="published",le="+Inf"} 4
lat_sum{outcome="published"} 1.5
lat_count{outcome="published"} 4
lat_bucket{outcome="failed",le="+Inf"} 1
lat_sum{outcome="failed"} 0.25
lat_count{outcome="failed"} 1
# TYPE q summary
q_sum 2
q_count 8
`

func TestParseSample(t *testing.T) {
	for _, c := range []struct {
		name, label, value string
		want               proc.Sample
	}{
		{"every series", "", "", proc.Sample{"req_total": 7, "in_flight": 3, "loose": 7, "lat_sum": 1.75, "lat_count": 5, "q_sum": 2, "q_count": 8}},
		{"one label value", "outcome", "published", proc.Sample{"req_total": 5, "loose": 7, "lat_sum": 1.5, "lat_count": 4}},
		{"no series match", "outcome", "nothing", proc.Sample{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := proc.ParseSample(strings.NewReader(exposition), c.label, c.value)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	if _, err := proc.ParseSample(strings.NewReader("not { metrics"), "", ""); err == nil {
		t.Fatal("malformed exposition accepted")
	}
}

func TestParseBy(t *testing.T) {
	for _, c := range []struct {
		name, metric, label string
		want                map[string]float64
	}{
		{"counter by outcome", "req_total", "outcome", map[string]float64{"published": 5, "failed": 2}},
		{"no such label", "req_total", "topic", map[string]float64{"": 7}},
		{"unlabelled gauge", "in_flight", "outcome", map[string]float64{"": 3}},
		{"no such metric", "absent_total", "outcome", map[string]float64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := proc.ParseBy(strings.NewReader(exposition), c.metric, c.label)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	if _, err := proc.ParseBy(strings.NewReader("not { metrics"), "x", "y"); err == nil {
		t.Fatal("malformed exposition accepted")
	}
}

// FuzzParse feeds arbitrary exposition text to both parsers: neither may panic, and they accept
// and reject the same inputs.
func FuzzParse(f *testing.F) {
	f.Add(exposition)
	f.Add("# TYPE g gauge\ng{outcome=\"a\"} NaN\n")
	f.Add("x_total 1\nx_total 2\n")
	f.Fuzz(func(t *testing.T, text string) {
		_, err1 := proc.ParseSample(strings.NewReader(text), "outcome", "published")
		_, err2 := proc.ParseBy(strings.NewReader(text), "req_total", "outcome")
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("ParseSample: %v; ParseBy: %v", err1, err2)
		}
	})
}
