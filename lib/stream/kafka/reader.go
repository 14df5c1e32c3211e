package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// GroupReader consumes topics as a member of a consumer group with explicit
// commits: Fetch hands out messages, and nothing is committed until the
// caller calls Commit for work that is durable. A crash therefore redelivers
// (at-least-once) and never skips. It also keeps the per-partition lag
// gauge current.
type GroupReader struct {
	r     *kafkago.Reader
	group string
	m     *Metrics
}

// NewGroupReader joins group on topics. m may be nil.
func NewGroupReader(cfg Config, group string, topics []string, m *Metrics) (*GroupReader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if group == "" {
		return nil, errors.New("kafka reader: group id is required (explicit commits need a consumer group)")
	}
	if len(topics) == 0 {
		return nil, errors.New("kafka reader: no topics")
	}
	for _, t := range topics {
		if err := validTopicName(t); err != nil {
			return nil, fmt.Errorf("kafka reader: %w", err)
		}
	}
	conn, err := newConnection(&cfg)
	if err != nil {
		return nil, err
	}
	start := kafkago.FirstOffset
	if cfg.Reader.StartOffset == "latest" {
		start = kafkago.LastOffset
	}
	rc := kafkago.ReaderConfig{
		Brokers:           cfg.Brokers,
		GroupID:           group,
		GroupTopics:       topics,
		Dialer:            conn.dialer,
		QueueCapacity:     cfg.Reader.QueueCapacity,
		MinBytes:          1,
		MaxBytes:          cfg.Reader.FetchMaxBytes,
		MaxWait:           cfg.Reader.MaxWait,
		HeartbeatInterval: cfg.Reader.HeartbeatInterval,
		SessionTimeout:    cfg.Reader.SessionTimeout,
		RebalanceTimeout:  cfg.Reader.SessionTimeout,
		// CommitInterval 0 makes CommitMessages synchronous: it returns
		// only when the broker has stored the offsets.
		CommitInterval:         0,
		StartOffset:            start,
		ReadBackoffMin:         100 * time.Millisecond,
		ReadBackoffMax:         2 * time.Second,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 10 * time.Second,
		// The group path computes lag from each message's high watermark
		// (see Fetch); kafka-go's lag poller only works without a group.
		ReadLagInterval: -1,
		IsolationLevel:  kafkago.ReadUncommitted,
		MaxAttempts:     10,
	}
	if cfg.Log != nil {
		rc.Logger = logFunc(cfg.Log, slog.LevelDebug, group)
		rc.ErrorLogger = logFunc(cfg.Log, slog.LevelWarn, group)
	}
	if err := rc.Validate(); err != nil {
		return nil, fmt.Errorf("kafka reader: %w", err)
	}
	return &GroupReader{r: kafkago.NewReader(rc), group: group, m: m.orNop()}, nil
}

// logFunc adapts slog to kafka-go's printf-style Logger.
func logFunc(l *slog.Logger, level slog.Level, who string) kafkago.LoggerFunc {
	return func(format string, args ...any) {
		l.Log(context.Background(), level, "kafka-go: "+fmt.Sprintf(format, args...), "client", who)
	}
}

// Group is the consumer group id.
func (g *GroupReader) Group() string { return g.group }

// Fetch returns the next message without committing it. It blocks until a
// message arrives, ctx ends (ctx.Err() is returned), or the reader is closed
// (io.EOF).
func (g *GroupReader) Fetch(ctx context.Context) (Message, error) {
	msg, err := g.r.FetchMessage(ctx)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			return Message{}, err
		}
		g.m.Errors.WithLabelValues("", "fetch").Inc()
		return Message{}, fmt.Errorf("kafka reader %s: fetch: %w", g.group, err)
	}
	g.m.MessagesIn.WithLabelValues(msg.Topic).Inc()
	g.m.BytesIn.WithLabelValues(msg.Topic).Add(float64(len(msg.Key) + len(msg.Value)))
	if msg.HighWaterMark > 0 {
		lag := msg.HighWaterMark - msg.Offset - 1
		if lag < 0 {
			lag = 0
		}
		g.m.Lag.WithLabelValues(g.group, msg.Topic, strconv.Itoa(msg.Partition)).Set(float64(lag))
	}
	return fromKafka(msg), nil
}

// Commit stores, for each topic-partition in msgs, the offset after the
// highest message given: everything up to it counts as processed. Call it
// only for work that is durable. It is synchronous.
func (g *GroupReader) Commit(ctx context.Context, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	start := time.Now()
	err := g.r.CommitMessages(ctx, toKafka(msgs)...)
	topic := msgs[0].Topic
	g.m.Latency.WithLabelValues(topic, "commit").Observe(time.Since(start).Seconds())
	if err != nil {
		g.m.Errors.WithLabelValues(topic, "commit").Inc()
		return fmt.Errorf("kafka reader %s: commit: %w", g.group, err)
	}
	return nil
}

// CommitOffset commits next as the offset to resume topic/partition from
// (the offset of the first unprocessed message).
func (g *GroupReader) CommitOffset(ctx context.Context, topic string, partition int, next int64) error {
	return g.Commit(ctx, Message{Topic: topic, Partition: partition, Offset: next - 1})
}

// Close leaves the group. Uncommitted messages will be redelivered to the
// next member.
func (g *GroupReader) Close() error {
	if err := g.r.Close(); err != nil {
		return fmt.Errorf("kafka reader %s: close: %w", g.group, err)
	}
	return nil
}
