package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"tau2rl/lib/logs"

	kafkago "github.com/segmentio/kafka-go"
)

// topicReaderWatchInterval is how often a TopicReader looks for partitions
// added to its topic (the group reader's PartitionWatchInterval).
var topicReaderWatchInterval = 10 * time.Second

// TopicReader reads every partition of one topic without a consumer group.
// It suits small topics that every process must read in full, like the
// compacted policy-versions topic: a consumer group per process would need
// a (prefixed) group ACL and leave a group behind on the cluster for every
// process that ever ran, while a TopicReader needs only READ on the topic
// (DESCRIBE is implied) and leaves nothing behind. It never commits: each
// TopicReader starts at cfg.Reader.StartOffset ("earliest" or "latest") on
// every partition and sees every message from there on, in order within a
// partition. Partitions added to the topic later are found within
// topicReaderWatchInterval and read from their start.
type TopicReader struct {
	cfg   Config
	topic string
	start int64
	admin *Admin
	m     *Metrics

	msgs   chan fetchResult
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	readers map[int]*kafkago.Reader
	closed  bool
}

// fetchResult is one message, or one error, of a partition reader.
type fetchResult struct {
	msg Message
	hwm int64 // kafka-go's high watermark of the partition, for the lag gauge
	err error
}

// NewTopicReader starts reading every partition of topic. It fails when
// the topic does not exist or is not visible to the principal. ctx bounds
// only the partition lookup; Close stops the reader. m may be nil.
func NewTopicReader(ctx context.Context, cfg Config, topic string, m *Metrics) (*TopicReader, error) {
	if err := validTopicName(topic); err != nil {
		return nil, fmt.Errorf("kafka topic reader: %w", err)
	}
	admin, err := NewAdmin(cfg)
	if err != nil {
		return nil, err
	}
	parts, err := admin.Partitions(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("kafka topic reader: %w", err)
	}
	start := kafkago.FirstOffset
	if cfg.Reader.StartOffset == "latest" {
		start = kafkago.LastOffset
	}
	rctx, cancel := context.WithCancel(context.Background())
	t := &TopicReader{
		cfg: cfg, topic: topic, start: start, admin: admin, m: m.orNop(),
		msgs: make(chan fetchResult), ctx: rctx, cancel: cancel,
		readers: make(map[int]*kafkago.Reader),
	}
	for _, p := range parts {
		if err := t.startPartition(p, start); err != nil {
			t.Close()
			return nil, err
		}
	}
	t.wg.Add(1)
	go t.watch()
	return t, nil
}

// startPartition starts a reader of partition p at offset.
func (t *TopicReader) startPartition(p int, offset int64) error {
	rc := kafkago.ReaderConfig{
		Brokers:        t.cfg.Brokers,
		Topic:          t.topic,
		Partition:      p,
		Dialer:         t.admin.dialer,
		QueueCapacity:  t.cfg.Reader.QueueCapacity,
		MinBytes:       1,
		MaxBytes:       t.cfg.Reader.FetchMaxBytes,
		MaxWait:        t.cfg.Reader.MaxWait,
		ReadBackoffMin: 100 * time.Millisecond,
		ReadBackoffMax: 2 * time.Second,
		// Lag comes from each message's high watermark (see Fetch).
		ReadLagInterval: -1,
		IsolationLevel:  kafkago.ReadUncommitted,
		MaxAttempts:     10,
	}
	who := t.topic + "/" + strconv.Itoa(p)
	if t.cfg.Log != nil {
		rc.Logger = logFunc(t.cfg.Log, slog.LevelDebug, who)
		rc.ErrorLogger = logFunc(t.cfg.Log, slog.LevelWarn, who)
	}
	if err := rc.Validate(); err != nil {
		return fmt.Errorf("kafka topic reader %s: %w", who, err)
	}
	r := kafkago.NewReader(rc)
	if err := r.SetOffset(offset); err != nil {
		r.Close()
		return fmt.Errorf("kafka topic reader %s: set offset: %w", who, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return r.Close()
	}
	t.readers[p] = r
	t.wg.Add(1)
	go t.pump(r, who)
	return nil
}

// pump hands the messages and errors of one partition reader to Fetch
// until the TopicReader is closed. kafka-go keeps retrying after an error,
// so an error does not end the partition.
func (t *TopicReader) pump(r *kafkago.Reader, who string) {
	defer t.wg.Done()
	for {
		msg, err := r.FetchMessage(t.ctx)
		if t.ctx.Err() != nil {
			return
		}
		res := fetchResult{msg: fromKafka(msg), hwm: msg.HighWaterMark}
		if err != nil {
			res = fetchResult{err: fmt.Errorf("kafka topic reader %s: fetch: %w", who, err)}
		}
		select {
		case t.msgs <- res:
		case <-t.ctx.Done():
			return
		}
	}
}

// watch starts readers for partitions added to the topic after the start.
// A failed lookup is retried at the next tick (the readers keep going).
func (t *TopicReader) watch() {
	defer t.wg.Done()
	tick := time.NewTicker(topicReaderWatchInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		parts, err := t.admin.Partitions(t.ctx, t.topic)
		if err != nil {
			if t.ctx.Err() == nil {
				logs.OrDiscard(t.cfg.Log).Warn("kafka topic reader: partition lookup failed", "topic", t.topic, "err", err)
			}
			continue
		}
		for _, p := range parts {
			t.mu.Lock()
			_, known := t.readers[p]
			t.mu.Unlock()
			if known {
				continue
			}
			// A partition created after the start holds only newer
			// messages: read it whole.
			if err := t.startPartition(p, kafkago.FirstOffset); err != nil {
				logs.OrDiscard(t.cfg.Log).Warn("kafka topic reader: new partition", "topic", t.topic, "partition", p, "err", err)
			}
		}
	}
}

// Partitions returns the ids of the partitions being read, in no order.
func (t *TopicReader) Partitions() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int, 0, len(t.readers))
	for p := range t.readers {
		out = append(out, p)
	}
	return out
}

// Fetch returns the next message of any partition. It blocks until a
// message arrives, ctx ends (ctx.Err() is returned), or the reader is
// closed (io.EOF). A partition's fetch errors are returned too (after
// kafka-go's retries); the reader goes on, so Fetch may be called again.
func (t *TopicReader) Fetch(ctx context.Context) (Message, error) {
	select {
	case res := <-t.msgs:
		if res.err != nil {
			t.m.Errors.WithLabelValues(t.topic, "fetch").Inc()
			return Message{}, res.err
		}
		msg := res.msg
		t.m.MessagesIn.WithLabelValues(msg.Topic).Inc()
		t.m.BytesIn.WithLabelValues(msg.Topic).Add(float64(len(msg.Key) + len(msg.Value)))
		if res.hwm > 0 {
			t.m.Lag.WithLabelValues("", msg.Topic, strconv.Itoa(msg.Partition)).Set(float64(max(res.hwm-msg.Offset-1, 0)))
		}
		return msg, nil
	case <-ctx.Done():
		return Message{}, ctx.Err()
	case <-t.ctx.Done():
		return Message{}, io.EOF
	}
}

// Close stops every partition reader. It is safe to call more than once.
func (t *TopicReader) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
	var errs []error
	for p, r := range t.readers {
		if err := r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("kafka topic reader %s/%d: close: %w", t.topic, p, err))
		}
	}
	return errors.Join(errs...)
}
