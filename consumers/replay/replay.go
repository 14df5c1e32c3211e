// Package replay republishes archived trajectories: it reads a Parquet dataset with filters
// (schemas/dataset) and publishes each trajectory to the scored-trajectories topic framed
// exactly as producers frame it (schemas.FrameTrajectories: Arrow IPC, version and content-type
// headers, key = task id), at a chosen rate. It lets the trainer or archiver be re-run on
// recorded data, and load-tests consumers with real shapes.
package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/logs"
	"tau2rl/lib/metrics"
	"tau2rl/lib/required"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

// Publisher is where replayed messages go. Publish must not return before the message is durably
// accepted (or buffered for Flush); Flush waits for everything published so far. The main wires
// lib/stream/kafka's writer; tests use an in-memory one.
type Publisher interface {
	Publish(ctx context.Context, key string, value []byte, headers map[string]string) error
	Flush(ctx context.Context) error
}

// Config configures a replay run.
type Config struct {
	// Dataset is a directory, Parquet file or glob (see dataset.Open). Required.
	Dataset string `yaml:"dataset"`
	// Filter selects the trajectories (default: every ok trajectory).
	Filter dataset.Filter `yaml:"filter"`
	// Rate is the publish rate in trajectories per second; 0 (default) = as fast as possible.
	Rate float64 `yaml:"rate"`
	// Burst is how many trajectories may go out back to back after idle time (default 1).
	Burst int `yaml:"burst"`
	// Limit stops after this many trajectories; 0 (default) = all.
	Limit int64 `yaml:"limit"`
	// FlushEvery calls Publisher.Flush after this many publishes (default 64), so a batching
	// publisher sends in round trips of that size. Pending messages are also flushed before the
	// rate limiter sleeps, so pacing is never distorted by buffering.
	FlushEvery int `yaml:"flush_every"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config { return Config{Burst: 1, FlushEvery: 64} }

// Validate checks the configuration.
func (c *Config) Validate() error {
	switch {
	case c.Dataset == "":
		return fmt.Errorf("replay: dataset is %w", required.ErrMissing)
	case c.Rate < 0:
		return fmt.Errorf("replay: rate %v < 0", c.Rate)
	case c.Burst < 1:
		return fmt.Errorf("replay: burst %d < 1", c.Burst)
	case c.Limit < 0:
		return fmt.Errorf("replay: limit %d < 0", c.Limit)
	case c.FlushEvery < 1:
		return fmt.Errorf("replay: flush_every %d < 1", c.FlushEvery)
	}
	return c.Filter.Validate()
}

// Stats reports a run.
type Stats struct {
	dataset.Stats
	// Published is the number of trajectories the publisher confirmed (a successful Flush after
	// their Publish); messages buffered when a flush failed are not counted.
	Published int64
	// Unconfirmed is the number of trajectories handed to the publisher whose flush failed: they
	// may or may not have reached the topic.
	Unconfirmed int64
	// Bytes is the total size of the published values.
	Bytes int64
	// Elapsed is the wall time of the run.
	Elapsed time.Duration
}

// Metrics are the replay counters (nil-safe).
type Metrics struct {
	published prometheus.Counter
	bytes     prometheus.Counter
	rowsRead  prometheus.Counter
}

// NewMetrics registers tau2rl_replay_* counters on reg (nil: unregistered; again on the same
// registry: the series already there, lib/metrics).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_replay_published_total", Help: "Trajectories republished."}),
		bytes:     prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_replay_published_bytes_total", Help: "Bytes of republished Arrow IPC values."}),
		rowsRead:  prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_replay_rows_read_total", Help: "Archive rows read (before filtering)."}),
	}
	s := metrics.NewSet(reg)
	m.published = metrics.Add(s, m.published)
	m.bytes = metrics.Add(s, m.bytes)
	m.rowsRead = metrics.Add(s, m.rowsRead)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	return m, nil
}

// errLimit ends the scan once Limit trajectories went out.
var errLimit = errors.New("replay limit reached")

// Run replays the dataset into pub and flushes it; log may be nil (discards). It returns what
// it did even on error.
func Run(ctx context.Context, cfg Config, pub Publisher, m *Metrics, log *slog.Logger) (Stats, error) {
	var st Stats
	if err := cfg.Validate(); err != nil {
		return st, err
	}
	log = logs.OrDiscard(log)
	ds, err := dataset.Open(cfg.Dataset)
	if err != nil {
		return st, fmt.Errorf("replay: %w", err)
	}
	start := time.Now()
	bucket := NewTokenBucket(cfg.Rate, cfg.Burst, nil)
	// Messages handed to Publish count as published only once a Flush has confirmed them: a
	// batching publisher only buffers, and a failed final flush must not report them as sent.
	var pending, pendingBytes int64
	flush := func() error {
		if err := pub.Flush(ctx); err != nil {
			err = fmt.Errorf("replay: flush (%d trajectories not confirmed): %w", pending, err)
			st.Unconfirmed += pending
			pending, pendingBytes = 0, 0
			return err
		}
		st.Published += pending
		st.Bytes += pendingBytes
		if m != nil {
			m.published.Add(float64(pending))
			m.bytes.Add(float64(pendingBytes))
		}
		pending, pendingBytes = 0, 0
		return nil
	}
	dst, err := ds.Scan(ctx, cfg.Filter, func(t *schemas.Trajectory) error {
		if cfg.Limit > 0 && st.Published+pending >= cfg.Limit {
			return errLimit
		}
		f, err := schemas.FrameTrajectories(t)
		if err != nil {
			// An archived row that no longer validates is reported, not silently skipped.
			return fmt.Errorf("replay: trajectory %s: %w", t.ID, err)
		}
		if pending > 0 && bucket.Delay() > 0 {
			if err := flush(); err != nil {
				return err
			}
		}
		if err := bucket.Wait(ctx); err != nil {
			return err
		}
		if err := pub.Publish(ctx, f.Key, f.Value, f.Headers); err != nil {
			return fmt.Errorf("replay: publish trajectory %s: %w", t.ID, err)
		}
		pending++
		pendingBytes += int64(len(f.Value))
		if pending >= int64(cfg.FlushEvery) {
			return flush()
		}
		return nil
	})
	st.Stats = dst
	if m != nil {
		m.rowsRead.Add(float64(dst.RowsRead))
	}
	if errors.Is(err, errLimit) {
		err = nil
	}
	if ferr := flush(); ferr != nil && err == nil {
		err = ferr
	}
	st.Elapsed = time.Since(start)
	log.Info("replay finished", "published", st.Published, "unconfirmed", st.Unconfirmed, "bytes", st.Bytes, "rows_read", st.RowsRead,
		"files", st.Files, "files_pruned", st.FilesPruned, "elapsed", st.Elapsed, "error", err)
	return st, err
}

// Clock abstracts time for the token bucket (tests use a fake).
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TokenBucket paces events at rate per second with up to burst back to back. A rate of 0 means
// unlimited. It is not safe for concurrent use (replay publishes from one goroutine).
type TokenBucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	clock  Clock
}

// NewTokenBucket returns a full bucket; clock nil means the real clock.
func NewTokenBucket(rate float64, burst int, clock Clock) *TokenBucket {
	if clock == nil {
		clock = realClock{}
	}
	if burst < 1 {
		burst = 1
	}
	return &TokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: clock.Now(), clock: clock}
}

// Delay is how long Wait would sleep now (0 when a token is available or the rate is unlimited).
func (b *TokenBucket) Delay() time.Duration {
	if b.rate <= 0 {
		return 0
	}
	tokens := min(b.burst, b.tokens+b.clock.Now().Sub(b.last).Seconds()*b.rate)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / b.rate * float64(time.Second))
}

// Wait takes one token, sleeping until one is available.
func (b *TokenBucket) Wait(ctx context.Context) error {
	if b.rate <= 0 {
		return ctx.Err()
	}
	for {
		now := b.clock.Now()
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
		if b.tokens >= 1 {
			b.tokens--
			return nil
		}
		need := time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
		if err := b.clock.Sleep(ctx, max(need, time.Microsecond)); err != nil {
			return err
		}
	}
}
