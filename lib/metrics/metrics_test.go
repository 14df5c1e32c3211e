package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func counter(help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_test_total", Help: help})
}

func TestRegister(t *testing.T) {
	// nil registry: usable, unregistered.
	c, err := Register(nil, counter("x"))
	if err != nil {
		t.Fatal(err)
	}
	c.Inc()

	reg := prometheus.NewRegistry()
	a, err := Register(reg, counter("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Register(reg, counter("x"))
	if err != nil {
		t.Fatal(err)
	}
	a.Inc()
	if testutil.ToFloat64(b) != 1 {
		t.Fatal("second registration does not share the series")
	}
	// A different collector under the same name is an error, not a panic.
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "tau2rl_test_total", Help: "other"})
	if _, err := Register(reg, g); err == nil {
		t.Fatal("clash accepted")
	}
	s := NewSet(reg)
	Add(s, counter("x"))
	Add(s, g)
	if s.Err() == nil {
		t.Fatal("Set lost the error")
	}
}
