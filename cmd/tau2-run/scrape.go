package main

import (
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sample is one scrape of a process's /metrics: the sum of each metric family
// over its label sets (counters and gauges), plus histogram sums and counts.
type sample map[string]float64

var scrapeClient = &http.Client{Timeout: 2 * time.Second}

// scrape reads addr's /metrics. Histograms contribute name_sum and name_count.
func scrape(addr string) (sample, error) {
	resp, err := scrapeClient.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	s := sample{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			addMetric(s, name, f.GetType(), m)
		}
	}
	return s, nil
}

func addMetric(s sample, name string, typ dto.MetricType, m *dto.Metric) {
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
