package replay

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
)

type sent struct {
	key     string
	value   []byte
	headers map[string]string
}

type memPublisher struct {
	mu      sync.Mutex
	msgs    []sent
	flushed int
	failAt  int
	// failFlush makes every Flush fail, as a writer does when the brokers are gone.
	failFlush bool
}

func (p *memPublisher) Publish(_ context.Context, key string, value []byte, headers map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failAt > 0 && len(p.msgs)+1 == p.failAt {
		return errors.New("broker unavailable")
	}
	p.msgs = append(p.msgs, sent{key, value, headers})
	return nil
}

func (p *memPublisher) Flush(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flushed++
	if p.failFlush {
		return errors.New("kafka: write: broker unavailable")
	}
	return nil
}

func archive(t *testing.T) (string, []*schemas.Trajectory) {
	t.Helper()
	rng := rand.New(rand.NewPCG(41, 42))
	var all []*schemas.Trajectory
	for i := 0; i < 16; i++ {
		o := schemas.DefaultSyntheticOptions()
		o.Calls, o.ContextTokens, o.CompletionTokens, o.ThinkTokens, o.Tasks = 5, 384, 32, 8, 4
		o.Domain = []string{"airline", "telecom"}[i%2]
		o.PolicyVersion = int64(i % 4)
		all = append(all, schemas.Synthetic(rng, o))
	}
	all[3].Status, all[3].Error = schemas.StatusInfraError, "evaluator: timeout"
	root := t.TempDir()
	if _, err := dataset.WritePartitioned(root, "part-0", all, schemas.DefaultParquetWriterOptions()); err != nil {
		t.Fatal(err)
	}
	return root, all
}

func TestReplayRoundTrip(t *testing.T) {
	root, all := archive(t)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pub := &memPublisher{}
	cfg := DefaultConfig()
	cfg.Dataset = root
	cfg.Filter.IncludeInfraErrors = true
	st, err := Run(context.Background(), cfg, pub, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Published != int64(len(all)) || len(pub.msgs) != len(all) || pub.flushed != 1 { // 16 < flush_every: only the final flush
		t.Fatalf("published %d (%d msgs, %d flushes), want %d", st.Published, len(pub.msgs), pub.flushed, len(all))
	}
	if testutil.ToFloat64(m.published) != float64(len(all)) || testutil.ToFloat64(m.rowsRead) != float64(len(all)) {
		t.Fatal("metrics not counted")
	}
	byID := map[string]*schemas.Trajectory{}
	for _, tr := range all {
		byID[tr.ID] = tr
	}
	seen := map[string]bool{}
	for _, msg := range pub.msgs {
		// Framed exactly like producers: consumers unframe it with the standard function.
		got, err := schemas.UnframeTrajectories(msg.value, msg.headers)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%d trajectories in one message", len(got))
		}
		want := byID[got[0].ID]
		if want == nil || seen[want.ID] {
			t.Fatalf("unexpected or duplicate trajectory %s", got[0].ID)
		}
		seen[want.ID] = true
		if msg.key != want.TaskID {
			t.Fatalf("key %q, want task id %q", msg.key, want.TaskID)
		}
		if !reflect.DeepEqual(got[0], want) {
			t.Fatalf("trajectory %s differs field by field after archive → replay → decode:\n got  %+v\n want %+v", want.ID, got[0], want)
		}
	}
}

func TestReplayFiltersAndLimit(t *testing.T) {
	root, all := archive(t)
	minV := int64(2)
	cfg := DefaultConfig()
	cfg.Dataset = root
	cfg.Filter = dataset.Filter{Domains: []string{"telecom"}, MinPolicyVersion: &minV}
	pub := &memPublisher{}
	st, err := Run(context.Background(), cfg, pub, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tr := range all {
		if cfg.Filter.Match(tr) {
			want = append(want, tr.ID)
		}
	}
	var got []string
	for _, msg := range pub.msgs {
		ts, _ := schemas.UnframeTrajectories(msg.value, msg.headers)
		got = append(got, ts[0].ID)
	}
	sort.Strings(want)
	sort.Strings(got)
	if len(want) == 0 || !reflect.DeepEqual(got, want) || st.FilesPruned == 0 {
		t.Fatalf("filtered replay: got %v want %v (stats %+v)", got, want, st)
	}

	cfg.Filter = dataset.Filter{}
	cfg.Limit = 3
	pub = &memPublisher{}
	if st, err = Run(context.Background(), cfg, pub, nil, nil); err != nil || st.Published != 3 || len(pub.msgs) != 3 {
		t.Fatalf("limit: %v %+v", err, st)
	}

	cfg.Limit = 0
	cfg.FlushEvery = 4
	pub = &memPublisher{}
	if st, err = Run(context.Background(), cfg, pub, nil, nil); err != nil || pub.flushed != int(st.Published)/4+1 {
		t.Fatalf("flush_every 4: %d flushes for %d messages (%v)", pub.flushed, st.Published, err)
	}
}

func TestReplayErrors(t *testing.T) {
	root, _ := archive(t)
	cfg := DefaultConfig()
	cfg.Dataset = root
	pub := &memPublisher{failAt: 2}
	st, err := Run(context.Background(), cfg, pub, nil, nil)
	if err == nil || st.Published != 1 || pub.flushed != 1 {
		t.Fatalf("publish failure: %v %+v", err, st)
	}
	for _, bad := range []Config{{}, {Dataset: root, Rate: -1, Burst: 1, FlushEvery: 1}, {Dataset: root, Burst: 0, FlushEvery: 1},
		{Dataset: root, Burst: 1, Limit: -1, FlushEvery: 1}, {Dataset: root, Burst: 1}} {
		if _, err := Run(context.Background(), bad, &memPublisher{}, nil, nil); err == nil {
			t.Errorf("config %+v accepted", bad)
		}
	}
	if _, err := Run(context.Background(), Config{Dataset: t.TempDir(), Burst: 1, FlushEvery: 1}, &memPublisher{}, nil, nil); err == nil {
		t.Error("empty dataset accepted")
	}
}

// fakeClock advances only when slept on.
type fakeClock struct {
	now   time.Time
	slept time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.now = c.now.Add(d)
	c.slept += d
	return nil
}

func TestTokenBucket(t *testing.T) {
	tests := []struct {
		rate   float64
		burst  int
		events int
		want   time.Duration
	}{
		{10, 1, 11, time.Second},     // first is free, then 10 more at 100 ms
		{10, 5, 15, time.Second},     // 5 free, then 10 at 100 ms
		{0.5, 1, 3, 4 * time.Second}, // slow rates
		{1000, 1, 1001, time.Second}, // fast rates
		{0, 1, 1000, 0},              // unlimited
		{4, 100, 50, 0},              // all within the burst
		{3, 1, 4, time.Second},       // non-integer intervals
	}
	for _, tc := range tests {
		c := &fakeClock{now: time.Unix(0, 0)}
		b := NewTokenBucket(tc.rate, tc.burst, c)
		for i := 0; i < tc.events; i++ {
			if err := b.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if d := c.slept - tc.want; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("rate %v burst %d, %d events: slept %v, want %v", tc.rate, tc.burst, tc.events, c.slept, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := NewTokenBucket(1, 1, &fakeClock{})
	b.Wait(context.Background())
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	// Real clock, short: 20 events at 1000/s take at least ~19 ms.
	rb := NewTokenBucket(1000, 1, nil)
	start := time.Now()
	for i := 0; i < 20; i++ {
		rb.Wait(context.Background())
	}
	if el := time.Since(start); el < 15*time.Millisecond {
		t.Fatalf("real clock: 20 events at 1000/s in %v", el)
	}
}

func TestRateIsApplied(t *testing.T) {
	root, all := archive(t)
	cfg := DefaultConfig()
	cfg.Dataset = root
	cfg.Filter.IncludeInfraErrors = true
	cfg.Rate = 200
	pub := &memPublisher{}
	st, err := Run(context.Background(), cfg, pub, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Paced messages are flushed before each sleep, not held for a batch.
	if pub.flushed < len(all)/2 {
		t.Fatalf("%d flushes for %d paced messages", pub.flushed, len(all))
	}
	// 16 trajectories at 200/s with burst 1: at least 15 intervals of 5 ms.
	if min := time.Duration(len(all)-1) * 5 * time.Millisecond; st.Elapsed < min*9/10 {
		t.Fatalf("replayed %d in %v at 200/s (want ≥ %v)", st.Published, st.Elapsed, min)
	}
}

// TestReplayCountsOnlyConfirmed: messages a batching publisher buffered are not reported as
// published when the flush that should send them fails (they used to be counted on Publish).
func TestReplayCountsOnlyConfirmed(t *testing.T) {
	root, all := archive(t)
	cfg := DefaultConfig()
	cfg.Dataset = root
	cfg.Filter = dataset.Filter{IncludeInfraErrors: true}
	cfg.FlushEvery = 1000 // only the final flush
	pub := &memPublisher{failFlush: true}
	st, err := Run(context.Background(), cfg, pub, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "not confirmed") {
		t.Fatalf("err = %v, want the failed flush", err)
	}
	if st.Published != 0 || st.Unconfirmed != int64(len(all)) {
		t.Fatalf("published %d, unconfirmed %d; want 0 and %d", st.Published, st.Unconfirmed, len(all))
	}
	cfg.FlushEvery = 4
	pub = &memPublisher{failFlush: true}
	if st, err = Run(context.Background(), cfg, pub, nil, nil); err == nil || st.Published != 0 || st.Unconfirmed != 4 {
		t.Fatalf("first flush fails: published %d, unconfirmed %d, err %v", st.Published, st.Unconfirmed, err)
	}
}

// A nil registry gives usable, unregistered metrics (it used to panic); a second NewMetrics on
// one registry shares the series.
func TestNewMetricsNilAndTwice(t *testing.T) {
	m, err := NewMetrics(nil)
	if err != nil || m == nil {
		t.Fatalf("NewMetrics(nil) = %v, %v", m, err)
	}
	m.published.Inc()
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err != nil {
		t.Fatalf("second NewMetrics on one registry: %v", err)
	}
}
