package proc

import (
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one scrape of a process's /metrics: each metric family summed over its label sets
// (counters, gauges, untyped), histograms and summaries as NAME_sum and NAME_count. A family
// with no series yet reads 0, which is what a progress display or a test polling a counter wants.
type Sample map[string]float64

var scrapeClient = &http.Client{Timeout: 2 * time.Second}

// Scrape reads the process's /metrics.
func (p *Proc) Scrape() (Sample, error) { return Scrape(p.MetricsAddr, "", "") }

// ScrapeWhere reads the process's /metrics, keeping only the series whose label has value.
func (p *Proc) ScrapeWhere(label, value string) (Sample, error) {
	return Scrape(p.MetricsAddr, label, value)
}

// Scrape reads addr's /metrics; a non-empty label keeps only the series where it has value.
func Scrape(addr, label, value string) (Sample, error) {
	var s Sample
	err := fetch(addr, func(r io.Reader) (err error) {
		s, err = ParseSample(r, label, value)
		return err
	})
	return s, err
}

// ScrapeBy reads the process's /metrics and returns metric's series summed by the value of label
// (counters, gauges and untyped metrics; a series without the label counts under ""): the
// trainer's groups_total by outcome, say.
func (p *Proc) ScrapeBy(metric, label string) (map[string]float64, error) {
	var by map[string]float64
	err := fetch(p.MetricsAddr, func(r io.Reader) (err error) {
		by, err = ParseBy(r, metric, label)
		return err
	})
	return by, err
}

// fetch GETs addr's /metrics and hands the body to read.
func fetch(addr string, read func(io.Reader) error) error {
	if addr == "" {
		return fmt.Errorf("proc: scrape: no metrics address")
	}
	resp, err := scrapeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return fmt.Errorf("proc: scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proc: scrape %s: %s", addr, resp.Status)
	}
	if err := read(resp.Body); err != nil {
		return fmt.Errorf("proc: scrape %s: %w", addr, err)
	}
	return nil
}

// ParseSample reads Prometheus text exposition into a Sample; a non-empty label keeps only the
// series where it has value.
func ParseSample(r io.Reader, label, value string) (Sample, error) {
	fams, err := parse(r)
	if err != nil {
		return nil, err
	}
	s := Sample{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if label != "" && !hasLabel(m, label, value) {
				continue
			}
			add(s, name, f.GetType(), m)
		}
	}
	return s, nil
}

// ParseBy reads Prometheus text exposition and returns metric's series summed by label's value,
// as ScrapeBy does; a metric that is not there gives an empty map.
func ParseBy(r io.Reader, metric, label string) (map[string]float64, error) {
	fams, err := parse(r)
	if err != nil {
		return nil, err
	}
	by := map[string]float64{}
	f, ok := fams[metric]
	if !ok {
		return by, nil
	}
	for _, m := range f.GetMetric() {
		v, _ := labelValue(m, label)
		s := Sample{}
		add(s, metric, f.GetType(), m)
		by[v] += s[metric]
	}
	return by, nil
}

func parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return fams, nil
}

func hasLabel(m *dto.Metric, label, value string) bool {
	v, ok := labelValue(m, label)
	return ok && v == value
}

// labelValue is m's value of label, and whether m has it.
func labelValue(m *dto.Metric, label string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == label {
			return l.GetValue(), true
		}
	}
	return "", false
}

func add(s Sample, name string, typ dto.MetricType, m *dto.Metric) {
	switch typ {
	case dto.MetricType_COUNTER:
		s[name] += m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		s[name] += m.GetGauge().GetValue()
	case dto.MetricType_UNTYPED:
		s[name] += m.GetUntyped().GetValue()
	case dto.MetricType_HISTOGRAM:
		s[name+"_sum"] += m.GetHistogram().GetSampleSum()
		s[name+"_count"] += float64(m.GetHistogram().GetSampleCount())
	case dto.MetricType_SUMMARY:
		s[name+"_sum"] += m.GetSummary().GetSampleSum()
		s[name+"_count"] += float64(m.GetSummary().GetSampleCount())
	}
}
