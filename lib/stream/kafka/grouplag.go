package kafka

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"tau2rl/lib/logs"

	"github.com/prometheus/client_golang/prometheus"
)

// The group-lag series. One set of descriptors serves every group and topic
// of a process (groupLagSet), so each consumer group's reader can add its own.
var (
	groupLagLabels = []string{"group", "topic", "partition"}
	groupLagDesc   = prometheus.NewDesc("tau2rl_kafka_group_lag",
		"Messages between the partition's high watermark and the group's committed offset (the whole end offset when the group never committed), for every partition of the topic.", groupLagLabels, nil)
	groupCommittedDesc = prometheus.NewDesc("tau2rl_kafka_group_committed_offset",
		"The group's committed offset per partition of the topic (-1: none).", groupLagLabels, nil)
	partitionEndDesc = prometheus.NewDesc("tau2rl_kafka_partition_end_offset",
		"The partition's high watermark (the offset of the next produced message).", []string{"topic", "partition"}, nil)
)

func newGroupLagErrors() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tau2rl_kafka_group_lag_query_errors_total",
		Help: "Scrapes whose group-lag query to Kafka failed."}, []string{"group", "topic"})
}

// GroupLag exports a consumer group's lag over ALL partitions of a topic, computed from the
// broker's view — the group's committed offset against the partition's high watermark — rather
// than from what this process fetched. tau2rl_kafka_consumer_lag covers only the partitions a
// member owns, so a partition held by a dead (ghost) member, or never assigned, reads as no lag
// while nothing consumes it; this collector makes such a partial stall visible and alertable
// (deploy/monitoring: Tau2PartitionStalled).
//
// Every GroupReader whose Metrics are registered exports it for its group and topics (so the
// archiver's, the trainer's and the producers' groups all have it); NewGroupLag is for a process
// that watches a group it is not a member of.
//
// It is a prometheus.Collector that queries Kafka on each scrape (bounded by Timeout), like
// kafka_exporter, so the numbers are as fresh as the scrape and no goroutine runs between
// scrapes. A failed query exports tau2rl_kafka_group_lag_query_errors_total and no lag samples,
// so the absence of data is itself visible. A GroupReader commits the position it starts from
// as soon as it is assigned a partition the group never committed, so a group that starts at
// the latest offset shows no lag rather than the whole end offset.
type GroupLag struct {
	admin        *Admin
	group, topic string
	// Timeout bounds one scrape's Kafka queries. Default 5s.
	Timeout time.Duration
	log     *slog.Logger
	errors  *prometheus.CounterVec
}

// NewGroupLag returns the collector for group on topic (not registered).
func NewGroupLag(cfg Config, group, topic string, log *slog.Logger) (*GroupLag, error) {
	admin, err := NewAdmin(cfg)
	if err != nil {
		return nil, err
	}
	gl := newGroupLag(admin, group, topic, log)
	gl.errors = newGroupLagErrors()
	return gl, nil
}

func newGroupLag(admin *Admin, group, topic string, log *slog.Logger) *GroupLag {
	return &GroupLag{admin: admin, group: group, topic: topic, Timeout: 5 * time.Second, log: logs.OrDiscard(log)}
}

// Describe implements prometheus.Collector.
func (g *GroupLag) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupLagDesc
	ch <- groupCommittedDesc
	ch <- partitionEndDesc
	g.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (g *GroupLag) Collect(ch chan<- prometheus.Metric) {
	g.collect(ch, g.errors, true)
	g.errors.Collect(ch)
}

// collect queries Kafka and sends the samples (the partition end offsets only with sendEnd),
// counting a failure in errs. It reports whether the query succeeded.
func (g *GroupLag) collect(ch chan<- prometheus.Metric, errs *prometheus.CounterVec, sendEnd bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), g.Timeout)
	defer cancel()
	lags, committed, ends, err := g.Lag(ctx)
	if err != nil {
		errs.WithLabelValues(g.group, g.topic).Inc()
		g.log.Warn("group lag query failed", "group", g.group, "topic", g.topic, "err", err)
		return false
	}
	for p, end := range ends {
		ps := strconv.Itoa(p)
		if sendEnd {
			ch <- prometheus.MustNewConstMetric(partitionEndDesc, prometheus.GaugeValue, float64(end), g.topic, ps)
		}
		ch <- prometheus.MustNewConstMetric(groupLagDesc, prometheus.GaugeValue, float64(lags[p]), g.group, g.topic, ps)
		c, ok := committed[p]
		if !ok {
			c = -1
		}
		ch <- prometheus.MustNewConstMetric(groupCommittedDesc, prometheus.GaugeValue, float64(c), g.group, g.topic, ps)
	}
	return true
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

// groupLagSet is the one group-lag collector of a registry: the GroupReaders of a process add
// their (group, topic) pairs while they run. A pair read by two readers at once (two members of
// one group in one process, as in tests) is exported once.
type groupLagSet struct {
	mu     sync.Mutex
	lags   map[[2]string][]*GroupLag
	errors *prometheus.CounterVec
}

func newGroupLagSet() *groupLagSet {
	return &groupLagSet{lags: map[[2]string][]*GroupLag{}, errors: newGroupLagErrors()}
}

func (s *groupLagSet) add(gl *GroupLag) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{gl.group, gl.topic}
	s.lags[k] = append(s.lags[k], gl)
}

func (s *groupLagSet) remove(gl *GroupLag) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{gl.group, gl.topic}
	for i, x := range s.lags[k] {
		if x == gl {
			s.lags[k] = append(s.lags[k][:i], s.lags[k][i+1:]...)
			break
		}
	}
	if len(s.lags[k]) == 0 {
		delete(s.lags, k)
	}
}

// Describe implements prometheus.Collector.
func (s *groupLagSet) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupLagDesc
	ch <- groupCommittedDesc
	ch <- partitionEndDesc
	s.errors.Describe(ch)
}

// Collect implements prometheus.Collector. A topic read by several groups exports its end
// offsets once.
func (s *groupLagSet) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	var lags []*GroupLag
	for _, gls := range s.lags {
		lags = append(lags, gls[0])
	}
	s.mu.Unlock()
	endSent := map[string]bool{}
	for _, gl := range lags {
		if gl.collect(ch, s.errors, !endSent[gl.topic]) {
			endSent[gl.topic] = true
		}
	}
	s.errors.Collect(ch)
}
