// Package stream is the contract between the roles and the message transport: what a message is,
// how a consumer-group subscription is read and committed, how messages are published, where the
// ones that cannot be processed go, and when an offset may be committed.
//
// The pipeline's data flows producers → schemas → stream → consumers and trainer (see
// docs/ARCHITECTURE.md). Producers, the archiver and the trainer depend on this package only;
// the transport behind it is Kafka through kafka-go (lib/stream/kafka, which implements Source,
// Publisher and DeadLetterer), and in development and tests the embedded Kafka-protocol broker
// (lib/stream/embedded), which only the broker binary, the dev runner and tests import.
//
// The delivery contract every role relies on:
//
//   - A partition is an ordered log; messages with one key (a task id) land in one partition.
//   - Delivery is at least once. A consumer commits, per partition, the offset to resume from, and
//     must commit only past messages whose effect is durable (a file synced, a checkpoint written,
//     a trajectory published). Messages finish out of order, so the commit point is a watermark:
//     Watermark computes it.
//   - A message that cannot be processed (bad framing, unknown schema version, invalid content) is
//     published to dead letters with its cause, and only then committed past: never silently
//     dropped, never a crash.
package stream

import (
	"context"
	"time"
)

// Message is one record of a partitioned log. Topic, Partition and Offset say where it was read
// (they are ignored when publishing, except that a writer bound to a topic rejects another);
// Key routes it to a partition; Time is the broker's timestamp on read, and on write the producer's
// (zero: now).
type Message struct {
	Topic     string
	Partition int
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Time      time.Time
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Source is a consumer-group subscription.
type Source interface {
	// Fetch blocks until the next message, ctx's end (ctx.Err()) or Close (io.EOF). It does not
	// commit.
	Fetch(ctx context.Context) (Message, error)
	// Commit records, for each partition among msgs, that every message up to and including the
	// highest offset given is processed: the group resumes after it. Commit only durable work.
	Commit(ctx context.Context, msgs ...Message) error
	// Close leaves the group; uncommitted messages are redelivered to the next member.
	Close() error
}

// Publisher publishes to one topic. Write returns once every message is acknowledged by the
// transport's durability rule (Kafka: acks from all in-sync replicas), or an error saying which
// failed; nothing is dropped silently.
type Publisher interface {
	Write(ctx context.Context, msgs ...Message) error
	Close() error
}

// DeadLetterer publishes a message that cannot be processed, with its cause, to the dead-letter
// topic. A consumer commits past the message only after DeadLetter returns nil.
type DeadLetterer interface {
	DeadLetter(ctx context.Context, msg Message, cause error) error
}

// CommitPoint is the message to pass to Source.Commit so that the group resumes partition p of
// topic at next (the offset of the first message not processed).
func CommitPoint(topic string, partition int, next int64) Message {
	return Message{Topic: topic, Partition: partition, Offset: next - 1}
}

// MessageSize is the size of msg as a Kafka record counts against the broker's and the writer's
// message limit (key, value, headers and record framing, uncompressed; it bounds what kafka-go
// counts, lib/stream/kafka's TestMessageSizeBoundsKafkaGo). Roles use it to keep what they
// publish under max_message_bytes: the producers split groups, the archiver dead-letters
// oversize input without decoding it.
func MessageSize(msg Message) int {
	n := 8 + 8 + 4 + len(msg.Key) + 4 + len(msg.Value) + 4 // offset, timestamp, key/value lengths, header count
	for _, h := range msg.Headers {
		n += 4 + len(h.Key) + 4 + len(h.Value)
	}
	return n
}
