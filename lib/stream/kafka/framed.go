package kafka

import (
	"context"
	"sort"

	"tau2rl/schemas"
)

// FromFramed converts a schemas.Framed message (transport-agnostic key,
// value, header map) into a Kafka message. Headers are sorted by name so the
// bytes on the wire are deterministic.
func FromFramed(f schemas.Framed) Message {
	return Message{Key: []byte(f.Key), Value: f.Value, Headers: headerList(f.Headers)}
}

func headerList(h map[string]string) []Header {
	if len(h) == 0 {
		return nil
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]Header, len(keys))
	for i, k := range keys {
		out[i] = Header{Key: k, Value: []byte(h[k])}
	}
	return out
}

// HeaderMap returns msg's headers as the map schemas' Unframe functions take.
// When a header repeats, the last value wins (Kafka allows repeats; the
// tau2rl framing never writes them).
func HeaderMap(msg Message) map[string]string {
	m := make(map[string]string, len(msg.Headers))
	for _, h := range msg.Headers {
		m[h.Key] = string(h.Value)
	}
	return m
}

// PublishFramed writes framed messages (one produce round trip for all of
// them) and waits for their acknowledgement. It is the Publisher the
// synthetic source and the producers use.
func (w *Writer) PublishFramed(ctx context.Context, msgs ...schemas.Framed) error {
	out := make([]Message, len(msgs))
	for i, f := range msgs {
		out[i] = FromFramed(f)
	}
	return w.Write(ctx, out...)
}

// Publish writes one message given as key, value and header map (the shape
// of the replay package's Publisher) and waits for its acknowledgement.
func (w *Writer) Publish(ctx context.Context, key string, value []byte, headers map[string]string) error {
	return w.Write(ctx, Message{Key: []byte(key), Value: value, Headers: headerList(headers)})
}
