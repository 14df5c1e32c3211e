package kafka

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"tau2rl/lib/logs"

	"github.com/prometheus/client_golang/prometheus"
)

// GroupLag exports a consumer group's lag over ALL partitions of a topic, computed from the
// broker's view — the group's committed offset against the partition's high watermark — rather
// than from what this process fetched. tau2rl_kafka_consumer_lag covers only the partitions a
// member owns, so a partition held by a dead (ghost) member, or never assigned, reads as no lag
// while nothing consumes it; this collector makes such a partial stall visible and alertable
// (deploy/monitoring: Tau2PartitionStalled).
//
// It is a prometheus.Collector that queries Kafka on each scrape (bounded by Timeout), like
// kafka_exporter, so the numbers are as fresh as the scrape and no goroutine runs between
// scrapes. A failed query exports tau2rl_kafka_group_lag_query_errors_total and no lag samples,
// so the absence of data is itself visible.
type GroupLag struct {
	admin        *Admin
	group, topic string
	// Timeout bounds one scrape's Kafka queries. Default 5s.
	Timeout time.Duration
	log     *slog.Logger

	lag, committed, end *prometheus.Desc
	errors              prometheus.Counter
}

// NewGroupLag returns the collector for group on topic (not registered).
func NewGroupLag(cfg Config, group, topic string, log *slog.Logger) (*GroupLag, error) {
	admin, err := NewAdmin(cfg)
	if err != nil {
		return nil, err
	}
	log = logs.OrDiscard(log)
	labels := []string{"group", "topic", "partition"}
	return &GroupLag{
		admin: admin, group: group, topic: topic, Timeout: 5 * time.Second, log: log,
		lag: prometheus.NewDesc("tau2rl_kafka_group_lag",
			"Messages between the partition's high watermark and the group's committed offset (the whole end offset when the group never committed), for every partition of the topic.", labels, nil),
		committed: prometheus.NewDesc("tau2rl_kafka_group_committed_offset",
			"The group's committed offset per partition of the topic (-1: none).", labels, nil),
		end: prometheus.NewDesc("tau2rl_kafka_partition_end_offset",
			"The partition's high watermark (the offset of the next produced message).", []string{"topic", "partition"}, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_kafka_group_lag_query_errors_total",
			Help: "Scrapes whose group-lag query to Kafka failed.", ConstLabels: prometheus.Labels{"group": group, "topic": topic}}),
	}, nil
}

// Describe implements prometheus.Collector.
func (g *GroupLag) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.lag
	ch <- g.committed
	ch <- g.end
	g.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (g *GroupLag) Collect(ch chan<- prometheus.Metric) {
	defer g.errors.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), g.Timeout)
	defer cancel()
	lags, committed, ends, err := g.Lag(ctx)
	if err != nil {
		g.errors.Inc()
		g.log.Warn("group lag query failed", "group", g.group, "topic", g.topic, "err", err)
		return
	}
	for p, end := range ends {
		ps := strconv.Itoa(p)
		ch <- prometheus.MustNewConstMetric(g.end, prometheus.GaugeValue, float64(end), g.topic, ps)
		ch <- prometheus.MustNewConstMetric(g.lag, prometheus.GaugeValue, float64(lags[p]), g.group, g.topic, ps)
		c, ok := committed[p]
		if !ok {
			c = -1
		}
		ch <- prometheus.MustNewConstMetric(g.committed, prometheus.GaugeValue, float64(c), g.group, g.topic, ps)
	}
}

// Lag queries the group's lag per partition of the topic: high watermark minus committed offset,
// or the high watermark when the group has no commit for the partition; it also returns the
// committed offsets (absent: none) and the high watermarks.
func (g *GroupLag) Lag(ctx context.Context) (lag, committed, end map[int]int64, err error) {
	end, err = g.admin.EndOffsets(ctx, g.topic)
	if err != nil {
		return nil, nil, nil, err
	}
	committed, err = g.admin.CommittedOffsets(ctx, g.group, g.topic)
	if err != nil {
		return nil, nil, nil, err
	}
	lag = make(map[int]int64, len(end))
	for p, e := range end {
		lag[p] = max(e-committed[p], 0)
	}
	return lag, committed, end, nil
}
