package sampler

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/metrics"
)

// Metrics are the engine's Prometheus series (prefix tau2rl_sampler_). A nil *Metrics records
// nothing.
type Metrics struct {
	promptTokens, cachedTokens prometheus.Counter
	genTokens, stepTokens      prometheus.Counter
	steps                      prometheus.Counter
	stepSeconds                prometheus.Histogram
	retractions                prometheus.Counter
	rejections                 prometheus.Counter
	requests                   *prometheus.CounterVec
	busySeconds                *prometheus.CounterVec
	running, waiting           prometheus.Gauge
	kvUsage, kvBlocks, cached  prometheus.Gauge
	hitRate, tokensPerSecond   prometheus.Gauge
	paused                     prometheus.Gauge
	weightUpdates              *prometheus.HistogramVec

	// Running sums for the hit-rate gauge and the tokens/s estimate (engine goroutine only).
	prompt, hits float64
	rateStart    time.Time
	rateTokens   int
}

// NewMetrics creates the series and registers them with reg through lib/metrics (nil:
// unregistered; again on the same registry: the series already there; a clash: an error).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "tau2rl", Subsystem: "sampler", Name: name, Help: help})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "tau2rl", Subsystem: "sampler", Name: name, Help: help})
	}
	m := &Metrics{
		promptTokens: c("prompt_tokens_total", "Prompt tokens of admitted requests."),
		cachedTokens: c("cached_tokens_total", "Prompt tokens supplied by the prefix cache (no prefill)."),
		genTokens:    c("generation_tokens_total", "Tokens sampled."),
		stepTokens:   c("step_tokens_total", "Tokens run through the model (prefill chunks and decode tokens)."),
		steps:        c("steps_total", "Decoder steps."),
		stepSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "tau2rl", Subsystem: "sampler", Name: "step_seconds",
			Help: "Wall time of one decoder step.", Buckets: prometheus.ExponentialBuckets(1e-4, 2, 18)}),
		retractions: c("retractions_total", "Requests preempted (cache full) or recomputed after a weight update."),
		rejections:  c("rejected_draws_total", "Draws of ids ≥ the sample vocabulary limit (padded LM-head rows), discarded and redrawn."),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tau2rl", Subsystem: "sampler", Name: "requests_total",
			Help: "Finished requests by finish reason (stop, length, abort)."}, []string{"finish"}),
		busySeconds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tau2rl", Subsystem: "sampler", Name: "busy_seconds_total",
			Help: "Engine time by phase (decode, prefill, mixed steps; weight_update: swaps and pauses); the rest of the wall clock is idle."}, []string{"phase"}),
		running:         g("running_requests", "Requests in the running batch."),
		waiting:         g("queued_requests", "Requests waiting for admission."),
		kvUsage:         g("kv_cache_usage_ratio", "Fraction of KV-cache blocks allocated (running requests and prefix cache)."),
		kvBlocks:        g("kv_cache_blocks", "KV-cache blocks in the pool."),
		cached:          g("prefix_cache_blocks", "Blocks held by the prefix cache."),
		hitRate:         g("prefix_cache_hit_rate", "Cached prompt tokens over prompt tokens, since start."),
		tokensPerSecond: g("generation_tokens_per_second", "Sampled tokens per second over the last few seconds."),
		paused:          g("paused", "1 while generation is paused."),
		weightUpdates: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "tau2rl", Subsystem: "sampler", Name: "weight_update_seconds",
			Help:    "Time to put new weights into the decoder, by source: disk (host-to-device upload of a checkpoint already read) or ipc (device-to-device copy from the trainer's buffer).",
			Buckets: prometheus.ExponentialBuckets(1e-4, 2, 20)}, []string{"source"}),
	}
	set := metrics.NewSet(reg)
	m.promptTokens, m.cachedTokens = metrics.Add(set, m.promptTokens), metrics.Add(set, m.cachedTokens)
	m.genTokens, m.stepTokens, m.steps = metrics.Add(set, m.genTokens), metrics.Add(set, m.stepTokens), metrics.Add(set, m.steps)
	m.stepSeconds = metrics.Add(set, m.stepSeconds)
	m.retractions, m.rejections = metrics.Add(set, m.retractions), metrics.Add(set, m.rejections)
	m.requests = metrics.Add(set, m.requests)
	m.busySeconds = metrics.Add(set, m.busySeconds)
	for _, p := range BusyPhases { // every phase is exported from the start, also at 0
		m.busySeconds.WithLabelValues(p)
	}
	m.running, m.waiting = metrics.Add(set, m.running), metrics.Add(set, m.waiting)
	m.kvUsage, m.kvBlocks, m.cached = metrics.Add(set, m.kvUsage), metrics.Add(set, m.kvBlocks), metrics.Add(set, m.cached)
	m.hitRate, m.tokensPerSecond = metrics.Add(set, m.hitRate), metrics.Add(set, m.tokensPerSecond)
	m.paused = metrics.Add(set, m.paused)
	m.weightUpdates = metrics.Add(set, m.weightUpdates)
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("sampler: %w", err)
	}
	return m, nil
}

func (m *Metrics) admitted(prompt, cached int) {
	if m == nil {
		return
	}
	m.promptTokens.Add(float64(prompt))
	m.cachedTokens.Add(float64(cached))
	m.prompt += float64(prompt)
	m.hits += float64(cached)
	m.hitRate.Set(m.hits / m.prompt)
}

func (m *Metrics) retracted() {
	if m != nil {
		m.retractions.Inc()
	}
}

func (m *Metrics) rejected() {
	if m != nil {
		m.rejections.Inc()
	}
}

func (m *Metrics) finished(reason string) {
	if m != nil {
		m.requests.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) stepped(d time.Duration, tokens, generated int) {
	if m == nil {
		return
	}
	m.steps.Inc()
	m.stepSeconds.Observe(d.Seconds())
	m.stepTokens.Add(float64(tokens))
	m.genTokens.Add(float64(generated))
	now := time.Now()
	if m.rateStart.IsZero() {
		m.rateStart = now
	}
	m.rateTokens += generated
	if el := now.Sub(m.rateStart); el >= 2*time.Second {
		m.tokensPerSecond.Set(float64(m.rateTokens) / el.Seconds())
		m.rateStart, m.rateTokens = now, 0
	}
}

func (m *Metrics) weightUpdate(source string, d time.Duration) {
	if m != nil {
		m.weightUpdates.WithLabelValues(source).Observe(d.Seconds())
	}
}

func (m *Metrics) busy(phase string, d time.Duration) {
	if m != nil {
		m.busySeconds.WithLabelValues(phase).Add(d.Seconds())
	}
}

func (m *Metrics) observe(st Stats) {
	if m == nil {
		return
	}
	m.running.Set(float64(st.Running))
	m.waiting.Set(float64(st.Waiting))
	m.kvBlocks.Set(float64(st.TotalBlocks))
	m.kvUsage.Set(float64(st.UsedBlocks) / float64(max(1, st.TotalBlocks)))
	m.cached.Set(float64(st.CachedBlocks))
	p := 0.0
	if st.Paused {
		p = 1
	}
	m.paused.Set(p)
}
