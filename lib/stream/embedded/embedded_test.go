package embedded_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
)

func clientConfig(addr string) tkafka.Config {
	cfg := tkafka.DefaultConfig()
	cfg.Brokers = []string{addr}
	cfg.Partitions = 3
	cfg.Reader.SessionTimeout = 6 * time.Second
	cfg.Reader.HeartbeatInterval = 500 * time.Millisecond
	cfg.Reader.MaxWait = 100 * time.Millisecond
	return cfg
}

// TestRestartKeepsLogAndOffsets closes the broker and starts a new one on the
// same port and data directory: the messages and the group's committed
// offsets are still there, and the group resumes after its last commit.
func TestRestartKeepsLogAndOffsets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	b, err := embedded.Start(embedded.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	port := b.Port()
	cfg := clientConfig(b.Addr())
	if err := tkafka.EnsureTopics(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	w, err := tkafka.NewWriter(cfg, cfg.Topics.Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		if err := w.Write(ctx, tkafka.Message{Key: []byte(fmt.Sprint("k", i%5)), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := tkafka.NewGroupReader(cfg, "g", []string{cfg.Topics.Trajectories}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 10; i++ {
		m, err := r.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[string(m.Value)] = true
		if err := r.Commit(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	b.Close()
	b.Close() // idempotent

	b2, err := embedded.Start(embedded.Config{DataDir: dir, Port: port})
	if err != nil {
		t.Fatalf("restart on port %d: %v", port, err)
	}
	defer b2.Close()
	if b2.Addr() != b.Addr() {
		t.Fatalf("restarted on %s, want %s", b2.Addr(), b.Addr())
	}
	admin, err := tkafka.NewAdmin(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := admin.EndOffsets(ctx, cfg.Topics.Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != 30 {
		t.Fatalf("after restart the log holds %d messages, want 30", total)
	}
	r2, err := tkafka.NewGroupReader(cfg, "g", []string{cfg.Topics.Trajectories}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	for len(seen) < 30 {
		m, err := r2.Fetch(ctx)
		if err != nil {
			t.Fatalf("fetch after restart (have %d): %v", len(seen), err)
		}
		if seen[string(m.Value)] {
			t.Fatalf("committed message %s redelivered after broker restart", m.Value)
		}
		seen[string(m.Value)] = true
		if err := r2.Commit(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

func TestForPipeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := tkafka.DefaultConfig()
	cfg.Partitions = 3
	b, err := embedded.ForPipeline(ctx, embedded.Config{DataDir: t.TempDir()}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(cfg.Brokers) != 1 || cfg.Brokers[0] != b.Addr() {
		t.Fatalf("brokers %v not pointed at the embedded broker %s", cfg.Brokers, b.Addr())
	}
	admin, err := tkafka.NewAdmin(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range cfg.Topics.All() {
		parts, err := admin.Partitions(ctx, topic)
		if err != nil || len(parts) != cfg.Partitions {
			t.Fatalf("topic %s: %v partitions, err %v", topic, parts, err)
		}
	}
	// A second broker cannot take the same port.
	bad := tkafka.DefaultConfig()
	if _, err := embedded.ForPipeline(ctx, embedded.Config{Port: b.Port()}, &bad); err == nil {
		t.Fatal("second broker on a used port started")
	}
	if bad.Brokers[0] != tkafka.DefaultConfig().Brokers[0] {
		t.Fatalf("a failed start changed the brokers: %v", bad.Brokers)
	}
}

func TestLargeMessageThroughEmbedded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := embedded.Start(embedded.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := clientConfig(b.Addr())
	if err := tkafka.EnsureTopics(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Writer.Compression = "none" // keep the 6 MiB on the wire
	w, err := tkafka.NewWriter(cfg, cfg.Topics.Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	val := make([]byte, 6<<20)
	for i := range val {
		val[i] = byte(i * 7)
	}
	if err := w.Write(ctx, tkafka.Message{Key: []byte("big"), Value: val}); err != nil {
		t.Fatalf("6 MiB message: %v", err)
	}
	r, err := tkafka.NewGroupReader(cfg, "big", []string{cfg.Topics.Trajectories}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m, err := r.Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Value) != len(val) || m.Value[12345] != val[12345] {
		t.Fatalf("read back %d bytes", len(m.Value))
	}
}
