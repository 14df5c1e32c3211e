package stream

import (
	"sort"

	"tau2rl/schemas"
)

// FromFramed converts a schemas.Framed message (transport-agnostic key,
// value, header map) into a stream message. Headers are sorted by name so the
// bytes on the wire are deterministic.
func FromFramed(f schemas.Framed) Message {
	return Message{Key: []byte(f.Key), Value: f.Value, Headers: HeaderList(f.Headers)}
}

// HeaderList turns a header map into headers sorted by name.
func HeaderList(h map[string]string) []Header {
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
