package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
)

// startBroker starts an in-memory embedded broker for one test.
func startBroker(t testing.TB, cfg embedded.Config) (*embedded.Broker, tkafka.Config) {
	t.Helper()
	b, err := embedded.Start(cfg)
	if err != nil {
		t.Fatalf("start embedded broker: %v", err)
	}
	t.Cleanup(b.Close)
	kc := tkafka.DefaultConfig()
	kc.Brokers = []string{b.Addr()}
	kc.Partitions = 4
	kc.Reader.SessionTimeout = 6 * time.Second
	kc.Reader.HeartbeatInterval = 500 * time.Millisecond
	kc.Reader.MaxWait = 100 * time.Millisecond
	return b, kc
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestEnsureTopicsIdempotent(t *testing.T) {
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 20*time.Second)
	for i := 0; i < 2; i++ {
		if err := tkafka.EnsureTopics(ctx, cfg); err != nil {
			t.Fatalf("EnsureTopics run %d: %v", i, err)
		}
	}
	admin, err := tkafka.NewAdmin(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range cfg.Topics.All() {
		parts, err := admin.Partitions(ctx, topic)
		if err != nil {
			t.Fatalf("partitions %s: %v", topic, err)
		}
		if len(parts) != cfg.Partitions {
			t.Fatalf("%s has %d partitions, want %d", topic, len(parts), cfg.Partitions)
		}
	}
	// A later run with more partitions leaves existing topics alone.
	cfg.Partitions = 7
	if err := tkafka.EnsureTopics(ctx, cfg, cfg.Topics.Trajectories, "extra.topic"); err != nil {
		t.Fatal(err)
	}
	if parts, _ := admin.Partitions(ctx, cfg.Topics.Trajectories); len(parts) != 4 {
		t.Fatalf("existing topic re-partitioned to %d", len(parts))
	}
	if parts, err := admin.Partitions(ctx, "extra.topic"); len(parts) != 7 {
		t.Fatalf("new topic has %d partitions (%v), want 7", len(parts), err)
	}
	if err := tkafka.EnsureTopics(ctx, cfg, "bad/name"); err == nil {
		t.Fatal("EnsureTopics accepted an invalid topic name")
	}
}

func TestWriteReadCommitResume(t *testing.T) {
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 60*time.Second)
	if err := tkafka.EnsureTopics(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := tkafka.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	topic := cfg.Topics.Trajectories
	w, err := tkafka.NewWriter(cfg, topic, m)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	const n = 200
	var msgs []tkafka.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, tkafka.Message{
			Key:     []byte(fmt.Sprintf("task-%d", i%10)),
			Value:   []byte(fmt.Sprintf("v%03d", i)),
			Headers: []tkafka.Header{{Key: "i", Value: []byte(fmt.Sprint(i))}},
		})
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := testutil.ToFloat64(m.MessagesOut.WithLabelValues(topic)); got != n {
		t.Fatalf("messages_out = %v, want %d", got, n)
	}

	// Consume half, commit, close; a new member resumes exactly after it.
	r, err := tkafka.NewGroupReader(cfg, "g1", []string{topic}, m)
	if err != nil {
		t.Fatal(err)
	}
	partOfKey := map[string]int{}
	seen := map[string]bool{}
	for i := 0; i < n/2; i++ {
		msg, err := r.Fetch(ctx)
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		if p, ok := partOfKey[string(msg.Key)]; ok && p != msg.Partition {
			t.Fatalf("key %s in partitions %d and %d", msg.Key, p, msg.Partition)
		}
		partOfKey[string(msg.Key)] = msg.Partition
		seen[string(msg.Value)] = true
		if err := r.Commit(ctx, msg); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	admin, err := tkafka.NewAdmin(cfg)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := admin.CommittedOffsets(ctx, "g1", topic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, o := range committed {
		sum += o
	}
	if sum != n/2 {
		t.Fatalf("committed offsets sum to %d, want %d (%v)", sum, n/2, committed)
	}

	r2, err := tkafka.NewGroupReader(cfg, "g1", []string{topic}, m)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for len(seen) < n {
		msg, err := r2.Fetch(ctx)
		if err != nil {
			t.Fatalf("fetch after resume (have %d): %v", len(seen), err)
		}
		if seen[string(msg.Value)] {
			t.Fatalf("committed message %s redelivered", msg.Value)
		}
		if p := partOfKey[string(msg.Key)]; p != msg.Partition && p != 0 {
			t.Fatalf("key %s moved partition", msg.Key)
		}
		seen[string(msg.Value)] = true
		if err := r2.Commit(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.MessagesIn.WithLabelValues(topic)); got != n {
		t.Fatalf("messages_in = %v, want %d", got, n)
	}
	ends, err := admin.EndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for _, o := range ends {
		end += o
	}
	if end != n {
		t.Fatalf("end offsets sum %d, want %d", end, n)
	}
	// After reading everything the lag gauges are zero.
	for p := range ends {
		if lag := testutil.ToFloat64(m.Lag.WithLabelValues("g1", topic, fmt.Sprint(p))); lag != 0 {
			t.Fatalf("partition %d lag %v after draining", p, lag)
		}
	}
}

func TestOversizeMessageIsAnError(t *testing.T) {
	t.Run("client limit", func(t *testing.T) {
		_, cfg := startBroker(t, embedded.DefaultConfig())
		ctx := testCtx(t, 20*time.Second)
		cfg.MaxMessageBytes = 64 << 10
		if err := tkafka.EnsureTopics(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		m, _ := tkafka.NewMetrics(nil)
		w, err := tkafka.NewWriter(cfg, cfg.Topics.Trajectories, m)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		big := tkafka.Message{Key: []byte("k"), Value: make([]byte, 65<<10)}
		err = w.Write(ctx, tkafka.Message{Key: []byte("ok"), Value: []byte("small")}, big)
		if !errors.Is(err, tkafka.ErrMessageTooLarge) {
			t.Fatalf("oversize write: err = %v, want ErrMessageTooLarge", err)
		}
		if got := testutil.ToFloat64(m.Errors.WithLabelValues(cfg.Topics.Trajectories, "write")); got != 1 {
			t.Fatalf("errors metric = %v, want 1", got)
		}
	})
	t.Run("broker limit", func(t *testing.T) {
		// The broker accepts less than the client allows: with acks=all
		// the rejection comes back as an error instead of a silent loss.
		_, cfg := startBroker(t, embedded.Config{MaxMessageBytes: 256 << 10})
		ctx := testCtx(t, 30*time.Second)
		if err := tkafka.EnsureTopics(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		cfg.Writer.MaxAttempts = 1
		cfg.Writer.Compression = "none"
		w, err := tkafka.NewWriter(cfg, cfg.Topics.Trajectories, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		// EnsureTopics gave the trajectories topic a max.message.bytes
		// for 16 MiB; this one is created for 200 KiB messages.
		auto := "auto.small"
		if err := tkafka.EnsureTopics(ctx, withMax(cfg, 200<<10), auto); err != nil {
			t.Fatal(err)
		}
		w2, err := tkafka.NewWriter(cfg, auto, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Close()
		err = w2.Write(ctx, tkafka.Message{Key: []byte("k"), Value: make([]byte, 1<<20)})
		if err == nil {
			t.Fatal("broker-rejected message reported as written")
		}
		if !errors.Is(err, tkafka.ErrMessageTooLarge) && !strings.Contains(err.Error(), "Too Large") {
			t.Fatalf("unexpected error: %v", err)
		}
		// The same message passes on the topic sized for it.
		if err := w.Write(ctx, tkafka.Message{Key: []byte("k"), Value: make([]byte, 1<<20)}); err != nil {
			t.Fatalf("1 MiB to 16 MiB topic: %v", err)
		}
	})
}

func withMax(cfg tkafka.Config, n int) tkafka.Config {
	cfg.MaxMessageBytes = n
	return cfg
}

func TestMetricsRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := tkafka.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tkafka.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a.MessagesOut.WithLabelValues("t").Inc()
	if got := testutil.ToFloat64(b.MessagesOut.WithLabelValues("t")); got != 1 {
		t.Fatalf("second NewMetrics does not share series: %v", got)
	}
}
