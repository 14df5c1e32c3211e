package kafka

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/metrics"
)

// Metrics are the transport's Prometheus series. One Metrics is shared by
// every writer and reader of a process; the labels say which topic (and for
// lag which group and partition). Operation labels ("op") are write, fetch,
// commit, commit_dropped (a commit a GroupReader refused: a partition no
// longer owned, or an offset below the group's), join and dead_letter.
type Metrics struct {
	// MessagesOut counts messages acknowledged by the brokers, per topic.
	MessagesOut *prometheus.CounterVec
	// BytesOut counts key+value bytes acknowledged, per topic.
	BytesOut *prometheus.CounterVec
	// MessagesIn counts messages fetched, per topic.
	MessagesIn *prometheus.CounterVec
	// BytesIn counts key+value bytes fetched, per topic.
	BytesIn *prometheus.CounterVec
	// Errors counts failed operations, per topic and op.
	Errors *prometheus.CounterVec
	// DeadLetters counts messages sent to the dead-letter topic, per
	// origin topic.
	DeadLetters *prometheus.CounterVec
	// Lag is the consumer lag in messages (high watermark minus the next
	// offset to read), per group, topic and partition, as of the last
	// message fetched from that partition. The group is "" for a
	// TopicReader, which reads without one.
	Lag *prometheus.GaugeVec
	// Latency is the duration of a write (one WriteMessages call, i.e. a
	// batch) or a commit, per topic and op.
	Latency *prometheus.HistogramVec

	// groupLag is the registry's group-lag collector (GroupLag), to which each GroupReader adds
	// its group and topics; nil when the metrics are not registered (nothing would scrape it).
	groupLag *groupLagSet
}

// NewMetrics creates the transport metrics and registers them on reg (nil
// keeps them unregistered, for tests). Registering twice on the same
// registry reuses the series already there, so several components of one
// process may each call NewMetrics (lib/metrics).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		MessagesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tau2rl_kafka_messages_out_total", Help: "Messages acknowledged by Kafka (acks=all), per topic.",
		}, []string{"topic"}),
		BytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tau2rl_kafka_bytes_out_total", Help: "Key+value bytes acknowledged by Kafka, per topic.",
		}, []string{"topic"}),
		MessagesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tau2rl_kafka_messages_in_total", Help: "Messages fetched from Kafka, per topic.",
		}, []string{"topic"}),
		BytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tau2rl_kafka_bytes_in_total", Help: "Key+value bytes fetched from Kafka, per topic.",
		}, []string{"topic"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tau2rl_kafka_errors_total", Help: "Failed Kafka operations, per topic and op (write, fetch, commit, dead_letter).",
		}, []string{"topic", "op"}),
		DeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tau2rl_kafka_dead_letters_total", Help: "Messages published to the dead-letter topic, per origin topic.",
		}, []string{"topic"}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tau2rl_kafka_consumer_lag", Help: "Messages between the high watermark and the next offset to read, per group, topic and partition.",
		}, []string{"group", "topic", "partition"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tau2rl_kafka_op_seconds",
			Help:    "Duration of a batch write or an offset commit, per topic and op.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"topic", "op"}),
	}
	s := metrics.NewSet(reg)
	m.MessagesOut = metrics.Add(s, m.MessagesOut)
	m.BytesOut = metrics.Add(s, m.BytesOut)
	m.MessagesIn = metrics.Add(s, m.MessagesIn)
	m.BytesIn = metrics.Add(s, m.BytesIn)
	m.Errors = metrics.Add(s, m.Errors)
	m.DeadLetters = metrics.Add(s, m.DeadLetters)
	m.Lag = metrics.Add(s, m.Lag)
	m.Latency = metrics.Add(s, m.Latency)
	if reg != nil {
		m.groupLag = metrics.Add(s, newGroupLagSet())
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return m, nil
}

// orNop returns m, or unregistered metrics when m is nil, so callers may pass nil.
func (m *Metrics) orNop() *Metrics {
	if m != nil {
		return m
	}
	nop, _ := NewMetrics(nil) // unregistered: cannot fail
	return nop
}
