package step

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsComplete: every metric is created and registered (a nil one would panic on first use).
func TestMetricsComplete(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsNil() {
			t.Errorf("metric %s is nil", v.Type().Field(i).Name)
		}
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
}
