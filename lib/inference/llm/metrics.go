package llm

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/metrics"
)

// Metrics are the Prometheus series of all LLM clients of a process,
// labelled by endpoint name and operation. A nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec   // endpoint, op, outcome
	latency  *prometheus.HistogramVec // endpoint, op
	retries  *prometheus.CounterVec   // endpoint, op, reason
	tokens   *prometheus.CounterVec   // endpoint, direction
	inflight *prometheus.GaugeVec     // endpoint
	healthy  prometheus.Gauge         // endpoints in service, over the process's pools
	up       *prometheus.GaugeVec     // endpoint: 1 in service, 0 ejected
	ejected  *prometheus.CounterVec   // endpoint
}

// Outcome label values of tau2rl_llm_requests_total.
const (
	OutcomeOK          = "ok"
	OutcomeUnavailable = "unavailable"
	OutcomeRejected    = "rejected"
	OutcomeBadResponse = "bad_response"
	OutcomeCanceled    = "canceled"
)

// NewMetrics creates the series and registers them with reg (nil: not
// registered, e.g. in tests). Registering twice on one registry reuses the
// series already there, so several clients may call it.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tau2rl", Subsystem: "llm", Name: "requests_total",
			Help: "LLM calls by endpoint, operation and outcome (ok, unavailable, rejected, bad_response, canceled); one per call, whatever its retries.",
		}, []string{"endpoint", "op", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "tau2rl", Subsystem: "llm", Name: "request_seconds",
			Help:    "Wall time of LLM calls including queueing for a concurrency slot and retries.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"endpoint", "op"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tau2rl", Subsystem: "llm", Name: "retries_total",
			Help: "HTTP attempts that were retried, by reason (connection, timeout, status_429, status_5xx, body).",
		}, []string{"endpoint", "op", "reason"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tau2rl", Subsystem: "llm", Name: "tokens_total",
			Help: "Tokens sent (in: prompt) and received (out: completion) by successful calls.",
		}, []string{"endpoint", "direction"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "tau2rl", Subsystem: "llm", Name: "inflight",
			Help: "Calls holding a concurrency slot of the endpoint.",
		}, []string{"endpoint"}),
		healthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "tau2rl", Subsystem: "llm", Name: "healthy_endpoints",
			Help: "Policy endpoints in service (not ejected by passive health tracking), over the pools that have served calls.",
		}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "tau2rl", Subsystem: "llm", Name: "endpoint_in_service",
			Help: "1 while the policy endpoint is in service, 0 while passive health tracking has it ejected.",
		}, []string{"endpoint"}),
		ejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tau2rl", Subsystem: "llm", Name: "endpoint_ejections_total",
			Help: "Times passive health tracking ejected the policy endpoint (after consecutive infrastructure failures, or a failed probe).",
		}, []string{"endpoint"}),
	}
	s := metrics.NewSet(reg)
	m.requests = metrics.Add(s, m.requests)
	m.latency = metrics.Add(s, m.latency)
	m.retries = metrics.Add(s, m.retries)
	m.tokens = metrics.Add(s, m.tokens)
	m.inflight = metrics.Add(s, m.inflight)
	m.healthy = metrics.Add(s, m.healthy)
	m.up = metrics.Add(s, m.up)
	m.ejected = metrics.Add(s, m.ejected)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	return m, nil
}

func (m *Metrics) observe(endpoint, op, outcome string, seconds float64) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(endpoint, op, outcome).Inc()
	m.latency.WithLabelValues(endpoint, op).Observe(seconds)
}

func (m *Metrics) retry(endpoint, op, reason string) {
	if m != nil {
		m.retries.WithLabelValues(endpoint, op, reason).Inc()
	}
}

// Tokens adds to the token counters; clients call it on success.
func (m *Metrics) Tokens(endpoint string, in, out int) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues(endpoint, "in").Add(float64(in))
	m.tokens.WithLabelValues(endpoint, "out").Add(float64(out))
}

func (m *Metrics) inflightAdd(endpoint string, d float64) {
	if m != nil {
		m.inflight.WithLabelValues(endpoint).Add(d)
	}
}

// endpointHealth records an endpoint entering (in) or leaving service.
func (m *Metrics) endpointHealth(endpoint string, in bool) {
	if m == nil {
		return
	}
	if in {
		m.healthy.Inc()
		m.up.WithLabelValues(endpoint).Set(1)
		return
	}
	m.healthy.Dec()
	m.up.WithLabelValues(endpoint).Set(0)
}

func (m *Metrics) ejection(endpoint string) {
	if m != nil {
		m.ejected.WithLabelValues(endpoint).Inc()
	}
}
