package kafka

import (
	"context"

	"tau2rl/lib/stream"
	"tau2rl/schemas"
)

// PublishFramed writes framed messages (one produce round trip for all of
// them) and waits for their acknowledgement. It is the Publisher the
// synthetic source and the producers use.
func (w *Writer) PublishFramed(ctx context.Context, msgs ...schemas.Framed) error {
	out := make([]Message, len(msgs))
	for i, f := range msgs {
		out[i] = stream.FromFramed(f)
	}
	return w.Write(ctx, out...)
}

// Publish writes one message given as key, value and header map (the shape
// of the replay package's Publisher) and waits for its acknowledgement.
func (w *Writer) Publish(ctx context.Context, key string, value []byte, headers map[string]string) error {
	return w.Write(ctx, Message{Key: []byte(key), Value: value, Headers: stream.HeaderList(headers)})
}
