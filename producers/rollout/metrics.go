package rollout

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the producer's Prometheus series (tau2rl_producer_*). LLM
// client series are lib/inference/llm's (tau2rl_llm_*), Kafka's are
// lib/stream/kafka's (tau2rl_kafka_*).
type Metrics struct {
	EpisodesStarted  *prometheus.CounterVec   // domain
	EpisodesFinished *prometheus.CounterVec   // domain, status, termination
	Reward           *prometheus.HistogramVec // domain (τ² reward of graded episodes)
	ShapedReward     *prometheus.HistogramVec // domain
	Steps            *prometheus.HistogramVec // domain
	InvalidFormat    *prometheus.CounterVec   // domain
	ToolErrors       *prometheus.CounterVec   // domain
	Tokens           *prometheus.CounterVec   // domain, kind (prompt, completion)
	LLMLatency       *prometheus.HistogramVec // role (agent, user)
	EpisodeSeconds   *prometheus.HistogramVec // domain
	InFlight         prometheus.Gauge
	Requests         *prometheus.CounterVec // outcome
	StaleDropped     prometheus.Counter
	InfraErrors      *prometheus.CounterVec // domain, stage
	PolicyVersion    prometheus.Gauge
	Publish          prometheus.Histogram
	Abandoned        prometheus.Counter
}

// NewMetrics registers the series on reg (nil: unregistered); one Service
// per registry.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	ns := func(name string) string { return "tau2rl_producer_" + name }
	m := &Metrics{
		EpisodesStarted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("episodes_started_total"),
			Help: "τ² episodes started, per domain."}, []string{"domain"}),
		EpisodesFinished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("episodes_finished_total"),
			Help: "τ² episodes finished, per domain, status (ok, infra_error) and τ² termination reason."}, []string{"domain", "status", "termination"}),
		Reward: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: ns("reward"),
			Help: "τ² reward of graded episodes, per domain.", Buckets: []float64{0, 0.25, 0.5, 0.75, 1}}, []string{"domain"}),
		ShapedReward: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: ns("shaped_reward"),
			Help: "Episode reward after shaping (invalid-format penalty), per domain.", Buckets: []float64{-1, -0.5, -0.2, 0, 0.5, 0.8, 0.9, 1}}, []string{"domain"}),
		Steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: ns("steps"),
			Help: "τ² orchestrator steps per episode, per domain.", Buckets: prometheus.ExponentialBuckets(2, 2, 9)}, []string{"domain"}),
		InvalidFormat: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("invalid_format_turns_total"),
			Help: "Policy turns whose tool-call or thinking markup did not parse, per domain."}, []string{"domain"}),
		ToolErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("tool_errors_total"),
			Help: "Tool calls answered with an error (they count toward max_errors), per domain."}, []string{"domain"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("tokens_total"),
			Help: "Policy tokens per domain: prompt (sent, summed over calls) and completion (generated)."}, []string{"domain", "kind"}),
		LLMLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: ns("llm_call_seconds"),
			Help: "Latency of one agent or user-simulator call as the episode saw it (retries included).", Buckets: prometheus.ExponentialBuckets(0.005, 2, 16)}, []string{"role"}),
		EpisodeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: ns("episode_seconds"),
			Help: "Wall time of an episode including grading, per domain.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 16)}, []string{"domain"}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: ns("episodes_in_flight"), Help: "Episodes running now."}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("requests_total"),
			Help: "Rollout requests by outcome: started, stale, invalid (dead-lettered), duplicate, published, abandoned."}, []string{"outcome"}),
		StaleDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: ns("stale_dropped_total"),
			Help: "Rollout requests dropped because they were staler than max_head_offpolicyness or stale_after_version."}),
		InfraErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns("infra_errors_total"),
			Help: "Episodes ended by an infrastructure failure (never a reward), per domain and stage."}, []string{"domain", "stage"}),
		PolicyVersion: prometheus.NewGauge(prometheus.GaugeOpts{Name: ns("policy_version"), Help: "Latest policy version this producer knows of."}),
		Publish: prometheus.NewHistogram(prometheus.HistogramOpts{Name: ns("publish_seconds"),
			Help: "Time to publish one request's group (acks=all).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		Abandoned: prometheus.NewCounter(prometheus.CounterOpts{Name: ns("episodes_abandoned_total"),
			Help: "Episodes cancelled at shutdown after the grace period; their request is redelivered."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.EpisodesStarted, m.EpisodesFinished, m.Reward, m.ShapedReward, m.Steps, m.InvalidFormat,
		m.ToolErrors, m.Tokens, m.LLMLatency, m.EpisodeSeconds, m.InFlight, m.Requests, m.StaleDropped, m.InfraErrors,
		m.PolicyVersion, m.Publish, m.Abandoned} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("rollout: metrics: %w", err)
		}
	}
	return m, nil
}
