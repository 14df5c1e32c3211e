package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
)

// writeN writes n messages with values prefix0…prefix(n-1) and 10 keys, so
// they spread over the partitions.
func writeN(t *testing.T, ctx context.Context, cfg tkafka.Config, topic, prefix string, n int) {
	t.Helper()
	w, err := tkafka.NewWriter(cfg, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var msgs []tkafka.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, tkafka.Message{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: []byte(fmt.Sprintf("%s%d", prefix, i))})
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// readN fetches n messages and returns their values; it fails on an error.
func readN(t *testing.T, ctx context.Context, r *tkafka.TopicReader, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for i := 0; i < n; i++ {
		msg, err := r.Fetch(ctx)
		if err != nil {
			t.Fatalf("fetch %d of %d: %v", i, n, err)
		}
		got[string(msg.Value)]++
	}
	return got
}

func TestTopicReaderReadsEveryPartition(t *testing.T) {
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 30*time.Second)
	topic := cfg.Topics.PolicyVersions
	if err := tkafka.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	const n = 40
	writeN(t, ctx, cfg, topic, "a", n)

	// Two readers each see every message: no group shares them out.
	for i := 0; i < 2; i++ {
		r, err := tkafka.NewTopicReader(ctx, cfg, topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		if parts := r.Partitions(); len(parts) != cfg.Partitions {
			t.Fatalf("reading %d partitions, want %d", len(parts), cfg.Partitions)
		}
		got := readN(t, ctx, r, n)
		for j := 0; j < n; j++ {
			if got[fmt.Sprintf("a%d", j)] != 1 {
				t.Fatalf("reader %d: a%d seen %d times", i, j, got[fmt.Sprintf("a%d", j)])
			}
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if msg, err := r.Fetch(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("fetch past the end: %q, %v", msg.Value, err)
		}
		cancel()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Fetch(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("fetch after close: %v, want io.EOF", err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("second close: %v", err)
		}
	}

	// The reader left no consumer group behind.
	c := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...)}
	groups, err := c.ListGroups(ctx, &kafkago.ListGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups.Groups) != 0 {
		t.Fatalf("consumer groups on the broker: %+v", groups.Groups)
	}

	if _, err := tkafka.NewTopicReader(ctx, cfg, "no.such.topic", nil); err == nil {
		t.Fatal("reader of a missing topic started")
	}
	if _, err := tkafka.NewTopicReader(ctx, cfg, "bad/name", nil); err == nil {
		t.Fatal("reader of an invalid topic name started")
	}
}

func TestTopicReaderLatest(t *testing.T) {
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 30*time.Second)
	topic := cfg.Topics.PolicyVersions
	if err := tkafka.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	writeN(t, ctx, cfg, topic, "old", 20)
	cfg.Reader.StartOffset = "latest"
	r, err := tkafka.NewTopicReader(ctx, cfg, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The reader resolves "latest" asynchronously, so keep writing until
	// something arrives; nothing written before it started may.
	for i := 0; ; i++ {
		writeN(t, ctx, cfg, topic, fmt.Sprintf("new%d-", i), 10)
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		msg, err := r.Fetch(short)
		cancel()
		if err == nil {
			if !strings.HasPrefix(string(msg.Value), "new") {
				t.Fatalf("latest reader returned %q, written before it started", msg.Value)
			}
			return
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
	}
}

func TestTopicReaderFindsNewPartitions(t *testing.T) {
	defer tkafka.SetTopicReaderWatchInterval(50 * time.Millisecond)()
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 30*time.Second)
	topic := cfg.Topics.PolicyVersions
	cfg.Partitions = 1
	if err := tkafka.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	r, err := tkafka.NewTopicReader(ctx, cfg, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...)}
	resp, err := c.CreatePartitions(ctx, &kafkago.CreatePartitionsRequest{Topics: []kafkago.TopicPartitionsConfig{{Name: topic, Count: 3}}})
	if err != nil || resp.Errors[topic] != nil {
		t.Fatalf("add partitions: %v %v", err, resp)
	}
	for len(r.Partitions()) != 3 {
		select {
		case <-ctx.Done():
			t.Fatalf("still reading partitions %v", r.Partitions())
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Write to each partition explicitly.
	for p := 0; p < 3; p++ {
		conn, err := kafkago.DialLeader(ctx, "tcp", cfg.Brokers[0], topic, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.WriteMessages(kafkago.Message{Value: []byte(fmt.Sprintf("p%d", p))}); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	got := readN(t, ctx, r, 3)
	for p := 0; p < 3; p++ {
		if got[fmt.Sprintf("p%d", p)] != 1 {
			t.Fatalf("messages read %v, want one per partition", got)
		}
	}
}

// TestTopicReaderNeedsOnlyTopicRead shows the least privilege: READ on the
// topic and no group ACL at all, which a GroupReader could not work with.
func TestTopicReaderNeedsOnlyTopicRead(t *testing.T) {
	const topic = "tau2.policy_versions"
	admin, svc := aclCluster(t, topicACL(kmsg.ACLOperationRead, topic)...)
	ctx := testCtx(t, 30*time.Second)
	if err := tkafka.EnsureTopics(ctx, admin, topic, "tau2.secret"); err != nil {
		t.Fatal(err)
	}
	writeN(t, ctx, admin, topic, "v", 5)
	r, err := tkafka.NewTopicReader(ctx, svc, topic, nil)
	if err != nil {
		t.Fatalf("topic reader with READ only: %v", err)
	}
	defer r.Close()
	if got := readN(t, ctx, r, 5); len(got) != 5 {
		t.Fatalf("read %v", got)
	}
	// Without READ (hence without DESCRIBE) it is refused at the start.
	_, err = tkafka.NewTopicReader(ctx, svc, "tau2.secret", nil)
	if !errors.Is(err, kafkago.TopicAuthorizationFailed) {
		t.Fatalf("reader of a topic without READ: %v, want TopicAuthorizationFailed", err)
	}
	// A group reader on the same topic is refused: svc has no group ACL.
	g, err := tkafka.NewGroupReader(svc, "producer-versions-x", []string{topic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := g.Fetch(short); err == nil {
		t.Fatal("group reader without a group ACL fetched a message")
	}
}
