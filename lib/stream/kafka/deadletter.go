package kafka

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Dead-letter headers. A dead letter keeps the original key, value and
// headers byte for byte (so an operator can fix and republish it) and adds
// these headers saying why and where from.
const (
	HeaderDLError     = "dlq.error"            // the error text
	HeaderDLTopic     = "dlq.origin.topic"     // topic the message was read from
	HeaderDLPartition = "dlq.origin.partition" // its partition (decimal)
	HeaderDLOffset    = "dlq.origin.offset"    // its offset (decimal)
	HeaderDLTime      = "dlq.origin.time"      // its timestamp (RFC 3339, nanoseconds)
	HeaderDLConsumer  = "dlq.consumer"         // the component that gave up on it
	HeaderDLAt        = "dlq.at"               // when it was dead-lettered (RFC 3339)
	// HeaderDLTruncated is set, to the original value size, when the value
	// had to be cut to fit the size limit together with the added headers;
	// HeaderDLSHA256 is then the hex SHA-256 of the full original value.
	HeaderDLTruncated = "dlq.truncated"
	HeaderDLSHA256    = "dlq.sha256"
)

// maxErrorText bounds the error text stored in a dead letter.
const maxErrorText = 4096

// DeadLetters publishes messages a consumer cannot process to the
// dead-letter topic, with the error and the origin, so that nothing bad is
// dropped silently and the consumer can keep going.
type DeadLetters struct {
	w        *Writer
	consumer string
	m        *Metrics
}

// NewDeadLetters returns a publisher to cfg.Topics.DeadLetters. consumer
// names the component (e.g. "archiver") in every dead letter. m may be nil.
func NewDeadLetters(cfg Config, consumer string, m *Metrics) (*DeadLetters, error) {
	w, err := NewWriter(cfg, cfg.Topics.DeadLetters, m)
	if err != nil {
		return nil, fmt.Errorf("kafka dead letters: %w", err)
	}
	return &DeadLetters{w: w, consumer: consumer, m: m.orNop()}, nil
}

// DeadLetter publishes msg with cause and waits for the acknowledgement. Only
// after it returns nil may the caller commit past msg.
func (d *DeadLetters) DeadLetter(ctx context.Context, msg Message, cause error) error {
	dl := BuildDeadLetter(msg, cause, d.consumer, time.Now(), d.w.maxBytes)
	if err := d.w.Write(ctx, dl); err != nil {
		d.m.Errors.WithLabelValues(msg.Topic, "dead_letter").Inc()
		return fmt.Errorf("kafka: dead-letter %s/%d@%d: %w", msg.Topic, msg.Partition, msg.Offset, err)
	}
	d.m.DeadLetters.WithLabelValues(msg.Topic).Inc()
	return nil
}

// Close closes the underlying writer.
func (d *DeadLetters) Close() error { return d.w.Close() }

// BuildDeadLetter returns the dead-letter message for msg: the same key,
// value and headers plus the dlq.* headers. If the result would exceed
// maxBytes, the value is truncated and HeaderDLTruncated/HeaderDLSHA256
// record what was cut.
func BuildDeadLetter(msg Message, cause error, consumer string, now time.Time, maxBytes int) Message {
	text := "unknown error"
	if cause != nil {
		text = cause.Error()
	}
	// The error text gets at most a quarter of the size limit, so that the
	// headers always fit and truncating the value is enough.
	if limit := min(maxErrorText, maxBytes/4); len(text) > limit {
		text = strings.ToValidUTF8(text[:limit], "") + "…"
	}
	headers := make([]Header, 0, len(msg.Headers)+7)
	for _, h := range msg.Headers {
		if strings.HasPrefix(h.Key, "dlq.") {
			continue // a dead letter of a dead letter describes the latest failure only
		}
		headers = append(headers, h)
	}
	headers = append(headers,
		Header{Key: HeaderDLError, Value: []byte(text)},
		Header{Key: HeaderDLTopic, Value: []byte(msg.Topic)},
		Header{Key: HeaderDLPartition, Value: []byte(strconv.Itoa(msg.Partition))},
		Header{Key: HeaderDLOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
		Header{Key: HeaderDLConsumer, Value: []byte(consumer)},
		Header{Key: HeaderDLAt, Value: []byte(now.UTC().Format(time.RFC3339Nano))},
	)
	if !msg.Time.IsZero() {
		headers = append(headers, Header{Key: HeaderDLTime, Value: []byte(msg.Time.UTC().Format(time.RFC3339Nano))})
	}
	out := Message{Key: msg.Key, Value: msg.Value, Headers: headers}
	if over := MessageSize(out) - maxBytes; over > 0 {
		sum := sha256.Sum256(msg.Value)
		out.Headers = append(out.Headers,
			Header{Key: HeaderDLTruncated, Value: []byte(strconv.Itoa(len(msg.Value)))},
			Header{Key: HeaderDLSHA256, Value: []byte(hex.EncodeToString(sum[:]))},
		)
		keep := len(msg.Value) - (MessageSize(out) - maxBytes)
		if keep < 0 {
			keep = 0
		}
		out.Value = msg.Value[:keep]
	}
	return out
}

// DeadLetterInfo is what ParseDeadLetter reads back from a dead letter.
type DeadLetterInfo struct {
	Error     string
	Topic     string
	Partition int
	Offset    int64
	Consumer  string
	At        time.Time
	// OriginTime is the original message's timestamp, zero if unknown.
	OriginTime time.Time
	// TruncatedFrom is the original value size if the value was cut, else 0.
	TruncatedFrom int
	// SHA256 is the hex digest of the full original value when truncated.
	SHA256 string
}

// ParseDeadLetter reads the dlq.* headers of a dead-letter message. It
// rejects messages that are not dead letters or whose headers are malformed;
// it is fed by whatever is on the topic, so it never panics.
func ParseDeadLetter(msg Message) (DeadLetterInfo, error) {
	var info DeadLetterInfo
	seen := map[string]bool{}
	for _, h := range msg.Headers {
		if !strings.HasPrefix(h.Key, "dlq.") {
			continue
		}
		if seen[h.Key] {
			return info, fmt.Errorf("dead letter: header %s repeated", h.Key)
		}
		seen[h.Key] = true
		v := string(h.Value)
		if !utf8.ValidString(v) {
			return info, fmt.Errorf("dead letter: header %s is not UTF-8", h.Key)
		}
		var err error
		switch h.Key {
		case HeaderDLError:
			info.Error = v
		case HeaderDLTopic:
			info.Topic = v
		case HeaderDLPartition:
			info.Partition, err = strconv.Atoi(v)
			if err == nil && info.Partition < 0 {
				err = errors.New("negative")
			}
		case HeaderDLOffset:
			info.Offset, err = strconv.ParseInt(v, 10, 64)
			if err == nil && info.Offset < 0 {
				err = errors.New("negative")
			}
		case HeaderDLConsumer:
			info.Consumer = v
		case HeaderDLAt:
			info.At, err = time.Parse(time.RFC3339Nano, v)
		case HeaderDLTime:
			info.OriginTime, err = time.Parse(time.RFC3339Nano, v)
		case HeaderDLTruncated:
			info.TruncatedFrom, err = strconv.Atoi(v)
			if err == nil && info.TruncatedFrom < len(msg.Value) {
				err = fmt.Errorf("original size %d below stored %d", info.TruncatedFrom, len(msg.Value))
			}
		case HeaderDLSHA256:
			if b, e := hex.DecodeString(v); e != nil || len(b) != sha256.Size {
				err = errors.New("not a hex SHA-256")
			}
			info.SHA256 = v
		}
		if err != nil {
			return info, fmt.Errorf("dead letter: header %s=%q: %w", h.Key, truncateKey(h.Value), err)
		}
	}
	for _, k := range []string{HeaderDLError, HeaderDLTopic, HeaderDLPartition, HeaderDLOffset} {
		if !seen[k] {
			return info, fmt.Errorf("dead letter: missing header %s", k)
		}
	}
	if seen[HeaderDLTruncated] != seen[HeaderDLSHA256] {
		return info, errors.New("dead letter: dlq.truncated and dlq.sha256 must come together")
	}
	return info, nil
}
