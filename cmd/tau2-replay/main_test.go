package main

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/cmd/internal/cli"
	"tau2rl/cmd/internal/clitest"
	"tau2rl/consumers/replay"
	"tau2rl/lib/stream"
	"tau2rl/lib/stream/embedded"
	"tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

// TestReplayThroughKafka: archive-shaped Parquet → tau2-replay's run (against an embedded broker) → a
// consumer group reads the topic → every trajectory decodes field-by-field equal, keyed by task.
func TestReplayThroughKafka(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	var all []*schemas.Trajectory
	for i := 0; i < 6; i++ {
		o := schemas.DefaultSyntheticOptions()
		o.Calls, o.ContextTokens, o.CompletionTokens, o.ThinkTokens, o.Tasks = 4, 256, 16, 4, 3
		all = append(all, schemas.Synthetic(rng, o))
	}
	root := t.TempDir()
	if _, err := dataset.WritePartitioned(root, "part-0", all, schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := Config{Kafka: kafka.DefaultConfig(), Replay: replay.DefaultConfig()}
	cfg.Kafka.Partitions = 2
	cfg.Replay.Dataset = root
	cfg.Replay.FlushEvery = 4

	// The broker tau2-broker would be, in process: its topics created, cfg.Kafka pointed at it.
	b, err := embedded.ForPipeline(ctx, embedded.Config{}, &cfg.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	rt := &cli.Runtime{Registry: prometheus.NewRegistry(), Log: slog.New(slog.DiscardHandler), Ready: func() {}}
	if err := run(ctx, rt, &cfg); err != nil {
		t.Fatal(err)
	}

	r, err := kafka.NewGroupReader(cfg.Kafka, "test-replay", []string{cfg.Kafka.Topics.Trajectories}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	byID := map[string]*schemas.Trajectory{}
	for _, tr := range all {
		byID[tr.ID] = tr
	}
	for got := 0; got < len(all); got++ {
		msg, err := r.Fetch(ctx)
		if err != nil {
			t.Fatalf("after %d messages: %v", got, err)
		}
		ts, err := schemas.UnframeTrajectories(msg.Value, stream.HeaderMap(msg))
		if err != nil {
			t.Fatal(err)
		}
		want := byID[ts[0].ID]
		if want == nil || string(msg.Key) != want.TaskID || !reflect.DeepEqual(ts[0], want) {
			t.Fatalf("message %d (key %q) does not match the archived trajectory", got, msg.Key)
		}
		delete(byID, want.ID)
	}
}

// TestConfigFiles: testdata/config/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	clitest.ConfigFiles(t, "testdata/config", func() any {
		return &Config{Kafka: kafka.DefaultConfig(), Replay: replay.DefaultConfig()}
	})
}

// TestNoBrokerNamesTheRemedy: without a broker tau2-replay logged "ready" and then failed with
// "tau2-replay: tau2-replay: … dial tcp 127.0.0.1:9092: connect: connection refused" (issue 27
// item 18). It now fails before ready, once prefixed (the cli adds "tau2-replay: "), naming the
// address and what to do.
func TestNoBrokerNamesTheRemedy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := Config{Kafka: kafka.DefaultConfig(), Replay: replay.DefaultConfig()}
	cfg.Kafka.Brokers = []string{addr}
	cfg.Replay.Dataset = t.TempDir()
	ready := false
	rt := &cli.Runtime{Registry: prometheus.NewRegistry(), Log: slog.New(slog.DiscardHandler), Ready: func() { ready = true }}
	err = run(context.Background(), rt, &cfg)
	if err == nil {
		t.Fatal("ran without a broker")
	}
	if ready {
		t.Error("reported ready before finding the broker")
	}
	want := "kafka: no broker answers at kafka.brokers [" + addr + "] (failed to dial: failed to open connection to " + addr +
		": dial tcp " + addr + ": connect: connection refused): start one (for development: tau2-broker) or set kafka.brokers to your cluster's bootstrap servers"
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err, want)
	}
	if !errors.Is(err, kafka.ErrNoBroker) {
		t.Fatal("not ErrNoBroker")
	}
}
