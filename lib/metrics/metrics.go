// Package metrics holds the one way tau2rl registers Prometheus collectors.
//
// Every package with metrics has a constructor of the form
//
//	func NewMetrics(reg prometheus.Registerer) (*Metrics, error)
//
// that builds its collectors and registers each through Register (or its Set), so that:
//   - a nil registry leaves the metrics unregistered but usable (tests, tools that serve no
//     /metrics), never a panic;
//   - registering again on the same registry reuses the series already there, so several
//     components of one process (or several runs in one test) share them;
//   - a clash with a different collector of the same name is an error returned to the caller,
//     which reports it at start-up, rather than a panic.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it, or returns the identical collector already
// registered there. With a nil reg it returns c unregistered.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("metrics: register: %w", err)
}

// Set registers several collectors and keeps the first error, so a constructor reads as a list:
//
//	s := metrics.NewSet(reg)
//	m.A = metrics.Add(s, m.A)
//	m.B = metrics.Add(s, m.B)
//	return m, s.Err()
type Set struct {
	reg prometheus.Registerer
	err error
}

// NewSet returns a Set registering on reg (nil: nothing is registered).
func NewSet(reg prometheus.Registerer) *Set { return &Set{reg: reg} }

// Add registers c on s's registry (Register) and returns the collector to use.
func Add[C prometheus.Collector](s *Set, c C) C {
	got, err := Register(s.reg, c)
	if err != nil && s.err == nil {
		s.err = err
	}
	return got
}

// Err is the first registration error.
func (s *Set) Err() error { return s.err }
