package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"tau2rl/lib/stream"
)

// Message is the transport-neutral stream.Message: the roles see no kafka-go type. The reader
// and writer convert at kafka-go's boundary (toKafka, fromKafka).
type Message = stream.Message

// Header is a record header (stream.Header).
type Header = stream.Header

// toKafka converts msgs for kafka-go's writer and commit calls.
func toKafka(msgs []Message) []kafkago.Message {
	out := make([]kafkago.Message, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		out[i] = kafkago.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Time: m.Time}
		if len(m.Headers) > 0 {
			hs := make([]kafkago.Header, len(m.Headers))
			for k, h := range m.Headers {
				hs[k] = kafkago.Header(h)
			}
			out[i].Headers = hs
		}
	}
	return out
}

// fromKafka converts a fetched kafka-go message.
func fromKafka(m kafkago.Message) Message {
	out := Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value, Time: m.Time}
	if len(m.Headers) > 0 {
		out.Headers = make([]Header, len(m.Headers))
		for k, h := range m.Headers {
			out.Headers[k] = Header(h)
		}
	}
	return out
}

// Writer publishes to one topic with the settings this pipeline needs:
// acks from all in-sync replicas, zstd batches, batch and message sizes for
// multi-MB trajectories, and the Hash balancer on the key so that every
// message with one key (a task id) lands in one partition. Write is
// synchronous and returns every failure; nothing is dropped silently.
type Writer struct {
	w        *kafkago.Writer
	topic    string
	maxBytes int
	m        *Metrics
}

// NewWriter returns a Writer for topic. m may be nil.
func NewWriter(cfg Config, topic string, m *Metrics) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := validTopicName(topic); err != nil {
		return nil, fmt.Errorf("kafka writer: %w", err)
	}
	conn, err := newConnection(&cfg)
	if err != nil {
		return nil, err
	}
	codec, err := writerCodec(cfg.Writer.Compression)
	if err != nil {
		return nil, fmt.Errorf("kafka writer: %w", err)
	}
	w := &kafkago.Writer{
		Addr:         kafkago.TCP(cfg.Brokers...),
		Topic:        topic,
		Balancer:     &kafkago.Hash{},
		MaxAttempts:  cfg.Writer.MaxAttempts,
		BatchSize:    cfg.Writer.BatchSize,
		BatchBytes:   int64(cfg.MaxMessageBytes),
		BatchTimeout: cfg.Writer.BatchTimeout,
		WriteTimeout: cfg.Writer.WriteTimeout,
		ReadTimeout:  cfg.Writer.WriteTimeout,
		RequiredAcks: kafkago.RequireAll,
		Async:        false,
		// Batches leave kafka-go uncompressed and are compressed by the writer's own codec
		// (compressingTransport), so the level is this writer's, not process-wide.
		Transport: &compressingTransport{RoundTripper: conn.transport, codec: codec},
		// Topics are created by EnsureTopics with the configured partition
		// count; a broker that auto-creates would use its own default.
		AllowAutoTopicCreation: false,
	}
	if cfg.Log != nil {
		w.ErrorLogger = logFunc(cfg.Log, slog.LevelWarn, "writer "+topic)
	}
	return &Writer{w: w, topic: topic, maxBytes: cfg.MaxMessageBytes, m: m.orNop()}, nil
}

// Topic is the topic this writer publishes to.
func (w *Writer) Topic() string { return w.topic }

// MessageSize is stream.MessageSize, the size kafka-go counts against the batch limit.
func MessageSize(msg Message) int { return stream.MessageSize(msg) }

// Write publishes msgs and returns once every one is acknowledged by all
// in-sync replicas, or returns an error saying which failed. The caller
// keeps ownership of the byte slices but must not modify them until Write
// returns. A message over the size limit fails the whole call before
// anything is sent.
func (w *Writer) Write(ctx context.Context, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	var bytes int
	for i := range msgs {
		if msgs[i].Topic != "" && msgs[i].Topic != w.topic {
			return fmt.Errorf("kafka writer %s: message %d names topic %q", w.topic, i, msgs[i].Topic)
		}
		if n := MessageSize(msgs[i]); n > w.maxBytes {
			w.m.Errors.WithLabelValues(w.topic, "write").Inc()
			return fmt.Errorf("kafka writer %s: message %d (key %q) is %d bytes, limit %d: %w",
				w.topic, i, truncateKey(msgs[i].Key), n, w.maxBytes, ErrMessageTooLarge)
		}
		bytes += len(msgs[i].Key) + len(msgs[i].Value)
	}
	start := time.Now()
	err := w.w.WriteMessages(ctx, toKafka(msgs)...)
	w.m.Latency.WithLabelValues(w.topic, "write").Observe(time.Since(start).Seconds())
	if err != nil {
		w.m.Errors.WithLabelValues(w.topic, "write").Inc()
		var werr kafkago.WriteErrors
		if errors.As(err, &werr) {
			ok := len(msgs) - werr.Count()
			w.m.MessagesOut.WithLabelValues(w.topic).Add(float64(ok))
			return fmt.Errorf("kafka writer %s: %d of %d messages failed: %w", w.topic, werr.Count(), len(msgs), firstError(werr))
		}
		var tooLarge kafkago.MessageTooLargeError
		if errors.As(err, &tooLarge) {
			return fmt.Errorf("kafka writer %s: %w: %w", w.topic, ErrMessageTooLarge, err)
		}
		return fmt.Errorf("kafka writer %s: %w", w.topic, err)
	}
	w.m.MessagesOut.WithLabelValues(w.topic).Add(float64(len(msgs)))
	w.m.BytesOut.WithLabelValues(w.topic).Add(float64(bytes))
	return nil
}

// Close flushes and closes the writer.
func (w *Writer) Close() error {
	if err := w.w.Close(); err != nil {
		return fmt.Errorf("kafka writer %s: close: %w", w.topic, err)
	}
	return nil
}

func firstError(werr kafkago.WriteErrors) error {
	for _, e := range werr {
		if e != nil {
			if errors.Is(e, kafkago.MessageSizeTooLarge) {
				return fmt.Errorf("%w: %w", ErrMessageTooLarge, e)
			}
			return e
		}
	}
	return werr
}

func truncateKey(k []byte) string {
	if len(k) > 64 {
		return string(k[:64]) + "…"
	}
	return string(k)
}

// The Kafka types are the stream contract's implementations.
var (
	_ stream.Source       = (*GroupReader)(nil)
	_ stream.Publisher    = (*Writer)(nil)
	_ stream.DeadLetterer = (*DeadLetters)(nil)
)
