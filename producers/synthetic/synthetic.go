// Package synthetic is a SYNTHETIC trajectory source: it publishes fake
// trajectories of realistic shape (schemas.Synthetic: 30 policy calls, an
// 8k-token context, tool calls, incremental prompts) to the trajectories
// topic at a chosen rate. It exists for load tests, benchmarks and `make
// run` before the real producer is wired in; its output is tagged
// source=synthetic, its metrics and logs say "synthetic", and nothing it
// publishes is a τ² episode or may be trained on.
package synthetic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/logs"
	"tau2rl/lib/metrics"
	"tau2rl/schemas"
	"tau2rl/tau2/domains"
)

// Publisher sends framed messages and returns once they are acknowledged.
// *kafka.Writer (lib/stream/kafka) implements it.
type Publisher interface {
	PublishFramed(ctx context.Context, msgs ...schemas.Framed) error
}

// Config configures the synthetic source (the `synthetic:` block of
// tau2-producer's config in mode synthetic).
type Config struct {
	// Rate is trajectories per second; 0 publishes as fast as the
	// publisher accepts. Default 100.
	Rate float64 `yaml:"rate"`
	// Total stops the source after this many trajectories; 0 runs until
	// the context ends. Default 0.
	Total int `yaml:"total"`
	// Batch is how many messages go to the publisher per call (one produce
	// round trip). Default 64.
	Batch int `yaml:"batch"`
	// Pool is how many distinct base trajectories are generated up front;
	// each published copy gets a fresh id, trial and timestamps. Keep it
	// larger than a Kafka batch, or zstd would see repeated payloads and
	// flatter the compression. Default 256.
	Pool int `yaml:"pool"`
	// Domains are cycled through (one partition directory each in the
	// archive). Each must be a τ² domain of the one registry (tau2/domains),
	// so that a typo does not create an archive partition no real run
	// writes. Default DefaultDomains.
	Domains []string `yaml:"domains"`
	// Seed makes a run reproducible. Default 1.
	Seed uint64 `yaml:"seed"`
	// Trajectory shapes every trajectory (calls, context and completion
	// lengths, tasks, policy version). Default schemas.DefaultSyntheticOptions.
	Trajectory schemas.SyntheticOptions `yaml:"trajectory"`
}

// DefaultDomains are τ²-bench's benchmark domains: every registered
// domain but mock (a test domain) and telecom-workflow (telecom's tasks
// under another policy, so the same partition shapes). The package's test
// fails when a domain is registered without being listed here or excluded.
var DefaultDomains = []string{"airline", "banking_knowledge", "retail", "telecom"}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Rate: 100, Batch: 64, Pool: 256, Seed: 1,
		Domains:    slices.Clone(DefaultDomains),
		Trajectory: schemas.DefaultSyntheticOptions(),
	}
}

// Validate reports configuration errors.
func (c *Config) Validate() error {
	var errs []error
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("rate: %v must be ≥ 0", c.Rate))
	}
	if c.Total < 0 {
		errs = append(errs, fmt.Errorf("total: %d must be ≥ 0", c.Total))
	}
	if c.Batch < 1 {
		errs = append(errs, fmt.Errorf("batch: %d must be ≥ 1", c.Batch))
	}
	if c.Pool < 1 {
		errs = append(errs, fmt.Errorf("pool: %d must be ≥ 1", c.Pool))
	}
	if len(c.Domains) == 0 {
		errs = append(errs, errors.New("domains: at least one domain"))
	}
	for _, d := range c.Domains {
		if err := schemas.ValidatePathComponent(d); err != nil {
			errs = append(errs, fmt.Errorf("domains: %w", err))
		} else if !slices.Contains(domains.Names(), d) {
			errs = append(errs, fmt.Errorf("domains: %q is not a τ² domain (known: %s)", d, strings.Join(domains.Names(), ", ")))
		}
	}
	if err := schemas.ValidatePathComponent(c.Trajectory.Split); err != nil {
		errs = append(errs, fmt.Errorf("trajectory.split: %w", err))
	}
	if err := schemas.ValidateTokenDistribution(c.Trajectory.TokenDistribution); err != nil {
		errs = append(errs, fmt.Errorf("trajectory.token_distribution: %w", err))
	}
	if c.Trajectory.Calls < 1 || c.Trajectory.ContextTokens < 1 || c.Trajectory.CompletionTokens < 1 {
		errs = append(errs, errors.New("trajectory: calls, context_tokens and completion_tokens must be ≥ 1"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("synthetic config: %w", errors.Join(errs...))
	}
	return nil
}

// Metrics of the synthetic source. Names say synthetic so that a dashboard
// never mistakes this load for real rollouts.
type Metrics struct {
	Trajectories prometheus.Counter
	Bytes        prometheus.Counter
	Tokens       prometheus.Counter
	Errors       prometheus.Counter
	Publish      prometheus.Histogram
}

// NewMetrics registers the synthetic source's metrics on reg (nil: unregistered; again on the
// same registry: the series already there, lib/metrics).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Trajectories: prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_synthetic_trajectories_total", Help: "SYNTHETIC trajectories published (load source, not rollouts)."}),
		Bytes:        prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_synthetic_bytes_total", Help: "Arrow IPC bytes of SYNTHETIC trajectories published."}),
		Tokens:       prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_synthetic_generated_tokens_total", Help: "Completion tokens inside SYNTHETIC trajectories published."}),
		Errors:       prometheus.NewCounter(prometheus.CounterOpts{Name: "tau2rl_synthetic_publish_errors_total", Help: "Failed publish calls of the SYNTHETIC source."}),
		Publish: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tau2rl_synthetic_publish_seconds", Help: "Duration of one SYNTHETIC publish call (a batch).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
	}
	s := metrics.NewSet(reg)
	m.Trajectories = metrics.Add(s, m.Trajectories)
	m.Bytes = metrics.Add(s, m.Bytes)
	m.Tokens = metrics.Add(s, m.Tokens)
	m.Errors = metrics.Add(s, m.Errors)
	m.Publish = metrics.Add(s, m.Publish)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("synthetic: %w", err)
	}
	return m, nil
}

// Stats summarises a run.
type Stats struct {
	Trajectories int
	Bytes        int64
	Elapsed      time.Duration
}

// Source generates and frames synthetic trajectories; Run drives it. It is
// exported for benchmarks that want the messages without a publisher.
type Source struct {
	cfg  Config
	rng  *rand.Rand
	pool []*schemas.Trajectory
	next int
	seq  int
}

// NewSource generates the pool of base trajectories.
func NewSource(cfg Config) (*Source, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	for i := 0; i < cfg.Pool; i++ {
		o := cfg.Trajectory
		o.Domain = cfg.Domains[i%len(cfg.Domains)]
		s.pool = append(s.pool, schemas.Synthetic(s.rng, o))
	}
	return s, nil
}

// Next returns the next synthetic trajectory: a pool member (round robin,
// so consecutive messages differ) with a fresh id, trial and timestamps.
// The returned value shares token slices with the pool; do not modify them.
func (s *Source) Next() *schemas.Trajectory {
	base := s.pool[s.next]
	s.next = (s.next + 1) % len(s.pool)
	s.seq++
	t := *base
	t.ID = newID(s.rng)
	t.RequestID = ""
	t.Trial = s.rng.IntN(8)
	shift := time.Duration(s.seq) * time.Millisecond
	t.StartedAt = base.StartedAt.Add(shift)
	t.EndedAt = base.EndedAt.Add(shift)
	return &t
}

// Frame frames one trajectory as the real producer would.
func (s *Source) Frame(t *schemas.Trajectory) (schemas.Framed, error) {
	f, err := schemas.FrameTrajectories(t)
	if err != nil {
		return schemas.Framed{}, fmt.Errorf("synthetic: frame %s: %w", t.ID, err)
	}
	return f, nil
}

func newID(rng *rand.Rand) string {
	a, b := rng.Uint64(), rng.Uint64()
	a = a&^0xf000 | 0x4000
	b = b&^(0xc<<60) | (0x8 << 60)
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", a>>32, (a>>16)&0xffff, a&0xffff, b>>48, b&0xffffffffffff)
}

// framedBatch is one batch prepared by Run's framing goroutine.
type framedBatch struct {
	msgs   []schemas.Framed
	bytes  int64
	tokens int
	err    error
}

// batchSize is the number of messages of the batch after sent messages:
// cfg.Batch, cut at Total, and at most a second's worth at low rates. It
// depends only on counts, so batches can be framed ahead of their publish.
func batchSize(cfg Config, sent int) int {
	n := cfg.Batch
	if cfg.Total > 0 {
		n = min(n, cfg.Total-sent)
	}
	if cfg.Rate > 0 {
		n = min(n, max(1, int(cfg.Rate)))
	}
	return n
}

// frameAhead generates and frames batches on its own goroutine, one batch
// ahead of the publisher, so that Arrow encoding overlaps the produce round
// trip (the Kafka writer's compression and the broker's ack) as it does in
// the real producer, where many episodes finish concurrently. The channel
// holds one batch: at most three are in memory (publishing, queued,
// framing). It stops at Total, on a frame error (sent as the last batch),
// or when stop is closed.
func frameAhead(cfg Config, src *Source, stop <-chan struct{}) <-chan framedBatch {
	out := make(chan framedBatch, 1)
	go func() {
		defer close(out)
		for sent := 0; cfg.Total == 0 || sent < cfg.Total; {
			n := batchSize(cfg, sent)
			fb := framedBatch{msgs: make([]schemas.Framed, 0, n)}
			for i := 0; i < n; i++ {
				t := src.Next()
				f, err := src.Frame(t)
				if err != nil {
					fb.err = err
					break
				}
				fb.bytes += int64(len(f.Value))
				fb.tokens += t.GeneratedTokens()
				fb.msgs = append(fb.msgs, f)
			}
			select {
			case out <- fb:
			case <-stop:
				return
			}
			if fb.err != nil {
				return
			}
			sent += n
		}
	}()
	return out
}

// Run publishes synthetic trajectories until cfg.Total is reached or ctx
// ends (then it returns the stats and nil). A publish error is returned: the
// source does not retry on its own, since the writer already retried. It
// logs to log with source=synthetic (nil discards, lib/logs). Batches are
// framed one ahead of the publish (frameAhead).
func Run(ctx context.Context, cfg Config, pub Publisher, reg prometheus.Registerer, log *slog.Logger) (Stats, error) {
	src, err := NewSource(cfg)
	if err != nil {
		return Stats{}, err
	}
	return RunSource(ctx, src, pub, reg, log)
}

// RunSource is Run with the pool already generated (NewSource), so that a
// caller can pay the pool's start-up cost (256 trajectories of 30 calls by
// default) before load starts, and a benchmark can keep it out of its
// per-trajectory figures. src must not be used by anything else meanwhile.
func RunSource(ctx context.Context, src *Source, pub Publisher, reg prometheus.Registerer, log *slog.Logger) (Stats, error) {
	cfg := src.cfg
	log = logs.OrDiscard(log).With("source", "synthetic")
	m, err := NewMetrics(reg)
	if err != nil {
		return Stats{}, err
	}
	log.Info("synthetic source started: publishing SYNTHETIC trajectories (load test data, not rollouts)",
		"rate", cfg.Rate, "total", cfg.Total, "calls", cfg.Trajectory.Calls, "context_tokens", cfg.Trajectory.ContextTokens, "domains", cfg.Domains)
	var st Stats
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	batches := frameAhead(cfg, src, stop)
	for cfg.Total == 0 || st.Trajectories < cfg.Total {
		if ctx.Err() != nil {
			break
		}
		if cfg.Rate > 0 {
			// Pace: the batch is due when the rate allows its first message.
			due := start.Add(time.Duration(float64(st.Trajectories) / cfg.Rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
					st.Elapsed = time.Since(start)
					return st, nil
				case <-time.After(d):
				}
			}
		}
		var fb framedBatch
		select {
		case <-ctx.Done():
			st.Elapsed = time.Since(start)
			return st, nil
		case b, ok := <-batches:
			if !ok {
				// Unreachable: the framer stops only at Total, after an error, or on stop.
				return st, fmt.Errorf("synthetic: framer stopped after %d trajectories", st.Trajectories)
			}
			fb = b
		}
		if fb.err != nil {
			return st, fb.err
		}
		n := len(fb.msgs)
		t0 := time.Now()
		if err := pub.PublishFramed(ctx, fb.msgs...); err != nil {
			if ctx.Err() != nil {
				st.Elapsed = time.Since(start)
				return st, nil
			}
			m.Errors.Inc()
			return st, fmt.Errorf("synthetic: publish %d trajectories: %w", n, err)
		}
		m.Publish.Observe(time.Since(t0).Seconds())
		m.Trajectories.Add(float64(n))
		m.Bytes.Add(float64(fb.bytes))
		m.Tokens.Add(float64(fb.tokens))
		st.Trajectories += n
		st.Bytes += fb.bytes
	}
	st.Elapsed = time.Since(start)
	log.Info("synthetic source done", "trajectories", st.Trajectories, "bytes", st.Bytes, "elapsed", st.Elapsed)
	return st, nil
}
