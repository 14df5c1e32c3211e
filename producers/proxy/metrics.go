package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	tkafka "tau2rl/lib/stream/kafka"
)

// Metrics are the proxy's Prometheus series (tau2rl_proxy_*). The policy
// client's are lib/inference/llm's (tau2rl_llm_*), Kafka's are
// lib/stream/kafka's (tau2rl_kafka_*).
type Metrics struct {
	Requests      *prometheus.CounterVec // route, code
	Overhead      prometheus.Histogram   // seconds per chat call outside the policy server
	Generation    prometheus.Histogram   // seconds waiting for the policy server
	OpenSessions  prometheus.Gauge
	Sessions      *prometheus.CounterVec // outcome: finished, expired, aborted, shutdown
	TemplateDrift prometheus.Counter
	Tokens        *prometheus.CounterVec // kind: prompt, completion
	InvalidFormat prometheus.Counter
	PublishErrors *prometheus.CounterVec // topic: trajectories, infra_errors
}

// NewMetrics registers the series on reg (nil: unregistered); registering
// twice on one registry reuses the first series.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	ns := func(name string) string { return "tau2rl_proxy_" + name }
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("requests_total"),
			Help: "HTTP requests answered, per route and status code."}, []string{"route", "code"}),
		Overhead: prometheus.NewHistogram(prometheus.HistogramOpts{Name: ns("overhead_seconds"),
			Help:    "Wall time of a chat call spent in the proxy (parsing, rendering, tokenizing, recording, answering), excluding the policy server.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 14)}),
		Generation: prometheus.NewHistogram(prometheus.HistogramOpts{Name: ns("generation_seconds"),
			Help: "Wall time of a chat call's policy generation(s).", Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16)}),
		OpenSessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: ns("open_sessions"), Help: "Sessions open (not finished, aborted or expired)."}),
		Sessions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("sessions_total"),
			Help: "Sessions ended, per outcome: finished (trajectory published), aborted, expired, shutdown (infra-errors records)."}, []string{"outcome"}),
		TemplateDrift: prometheus.NewCounter(prometheus.CounterOpts{Name: ns("template_drift_total"),
			Help: "Calls whose messages extend none of the session's recorded states (the client edited or dropped earlier turns): a new prompt prefix was rendered."}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("tokens_total"),
			Help: "Tokens recorded, per kind (prompt, completion)."}, []string{"kind"}),
		InvalidFormat: prometheus.NewCounter(prometheus.CounterOpts{Name: ns("invalid_format_total"),
			Help: "Completions whose Qwen3 markup did not parse (returned as text, recorded with invalid_format)."}),
		PublishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("publish_errors_total"),
			Help: "Failed publishes (the session stays open and the publish is retried), per topic."}, []string{"topic"}),
	}
	if reg != nil {
		m.Requests = tkafka.RegisterOrReuse(reg, m.Requests)
		m.Overhead = tkafka.RegisterOrReuse(reg, m.Overhead)
		m.Generation = tkafka.RegisterOrReuse(reg, m.Generation)
		m.OpenSessions = tkafka.RegisterOrReuse(reg, m.OpenSessions)
		m.Sessions = tkafka.RegisterOrReuse(reg, m.Sessions)
		m.TemplateDrift = tkafka.RegisterOrReuse(reg, m.TemplateDrift)
		m.Tokens = tkafka.RegisterOrReuse(reg, m.Tokens)
		m.InvalidFormat = tkafka.RegisterOrReuse(reg, m.InvalidFormat)
		m.PublishErrors = tkafka.RegisterOrReuse(reg, m.PublishErrors)
	}
	return m
}
