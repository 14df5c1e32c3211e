package kafka_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
)

// TestGroupLagCoversEveryPartition: a group member fetches every partition
// but commits only partitions 0 and 1 (a partial stall: a ghost member, or a
// consumer stuck on some partitions). The process-level
// tau2rl_kafka_consumer_lag reads 0 on every partition it fetched, while the
// group lag — committed offset against the high watermark, for every
// partition of the topic — shows the uncommitted partitions' whole backlog
// (issue 13 item 9).
func TestGroupLagCoversEveryPartition(t *testing.T) {
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 30*time.Second)
	topic := cfg.Topics.Trajectories
	if err := tkafka.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	const n = 40
	writeN(t, ctx, cfg, topic, "m", n)
	reg := prometheus.NewRegistry()
	km, err := tkafka.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tkafka.NewGroupReader(cfg, "archiver", []string{topic}, km)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	next := map[int]int64{}
	for i := 0; i < n; i++ {
		m, err := r.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next[m.Partition] = m.Offset + 1
	}
	for p, off := range next {
		if p <= 1 {
			if err := r.CommitOffset(ctx, topic, p, off); err != nil {
				t.Fatal(err)
			}
		}
	}

	gl, err := tkafka.NewGroupLag(cfg, "archiver", topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The reader's metrics export the group lag themselves (gl only computes the expected values).
	lag, committed, end, err := gl.Lag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(end) != cfg.Partitions {
		t.Fatalf("end offsets of %d partitions, want %d", len(end), cfg.Partitions)
	}
	var want strings.Builder
	want.WriteString("# HELP tau2rl_kafka_group_lag Messages between the partition's high watermark and the group's committed offset (the whole end offset when the group never committed), for every partition of the topic.\n# TYPE tau2rl_kafka_group_lag gauge\n")
	stalled := int64(0)
	for p := 0; p < cfg.Partitions; p++ {
		wantLag := end[p]
		if p <= 1 {
			wantLag = 0
			if committed[p] != end[p] {
				t.Fatalf("partition %d committed %d, end %d", p, committed[p], end[p])
			}
		}
		if lag[p] != wantLag {
			t.Fatalf("partition %d: lag %d, want %d (end %d, committed %v)", p, lag[p], wantLag, end[p], committed)
		}
		stalled += wantLag
		want.WriteString("tau2rl_kafka_group_lag{group=\"archiver\",partition=\"" + strconv.Itoa(p) + "\",topic=\"" + topic + "\"} " + strconv.FormatInt(wantLag, 10) + "\n")
	}
	if stalled == 0 {
		t.Fatal("the keys put no message on partitions 2 and up; the test proves nothing")
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()), "tau2rl_kafka_group_lag"); err != nil {
		t.Fatal(err)
	}
	// The fetch-side lag of the same member says nothing is pending anywhere.
	if got := testutil.ToFloat64(lagOf(t, reg, topic)); got != 0 {
		t.Fatalf("fetch-side consumer lag sums to %v", got)
	}
}

// lagOf sums tau2rl_kafka_consumer_lag over the partitions of topic.
func lagOf(t *testing.T, reg *prometheus.Registry, topic string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "tau2rl_kafka_consumer_lag" {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue()
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sum"})
	g.Set(sum)
	return g
}
