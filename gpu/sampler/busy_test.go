package sampler

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
)

func TestStepPhase(t *testing.T) {
	decoding := &seq{draws: 3}
	fresh := &seq{}
	for _, c := range []struct {
		name  string
		batch []work
		want  string
	}{
		{"decode only", []work{{decoding, 1}, {decoding, 1}}, PhaseDecode},
		{"prompt chunk", []work{{fresh, 16}}, PhasePrefill},
		{"last prompt token after a cache hit", []work{{fresh, 1}}, PhasePrefill},
		{"recompute after a retraction", []work{{decoding, 40}}, PhasePrefill},
		{"decode beside a chunk", []work{{decoding, 1}, {fresh, 7}}, PhaseMixed},
	} {
		if got := stepPhase(c.batch); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// counterVec reads a CounterVec's value per label value off a registry.
func counterVec(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

func histogramSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// TestBusyTimeAddsUp: over requests, a hold and a weight swap, the engine's accounting adds up:
// the step phases sum to the step time the step histogram measured, busy time never exceeds the
// wall clock, prefill and decode both appear, the hold and the swap count as weight_update, and
// the Prometheus counters say what Stats says.
func TestBusyTimeAddsUp(t *testing.T) {
	w := tinyWeights(t, 5)
	dec, err := cpu.NewDecoder(w, gpu.KVCacheSpec{BlockSize: 4, NumBlocks: 512})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	met, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	// MaxStepTokens 8: prompts are prefilled over several steps, beside decoding requests.
	e, err := New(dec, Config{MaxStepTokens: 8}, nil, met, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.Run(context.Background()) }()
	t.Cleanup(func() { e.Close(); <-e.Done() })
	if got := counterVec(t, reg, "tau2rl_sampler_busy_seconds_total"); len(got) != len(BusyPhases) {
		t.Fatalf("phases exported before any work: %v, want all of %v", got, BusyPhases)
	}
	runBatched(t, e, testRequests())

	ctx := context.Background()
	if err := e.Pause(ctx, PauseInPlace); err != nil {
		t.Fatal(err)
	}
	const hold = 30 * time.Millisecond
	time.Sleep(hold)
	if err := e.SwapWeights(ctx, tinyWeights(t, 6), "1", false); err != nil {
		t.Fatal(err)
	}
	if err := e.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.SwapWeights(ctx, tinyWeights(t, 7), "2", false); err != nil { // not held: counted alone
		t.Fatal(err)
	}
	if err := e.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	wall := time.Since(before)
	b := st.Busy
	if b.Decode <= 0 || b.Prefill <= 0 || b.Mixed <= 0 {
		t.Fatalf("a phase never counted: %+v", b)
	}
	if b.WeightUpdate < hold {
		t.Fatalf("weight_update %v, want ≥ the %v hold", b.WeightUpdate, hold)
	}
	if b.Total() > wall || st.Started.Before(before) {
		t.Fatalf("busy %v over a wall of %v (started %v, test began %v)", b.Total(), wall, st.Started, before)
	}
	stepSum := histogramSum(t, reg, "tau2rl_sampler_step_seconds")
	if d := math.Abs(b.Steps().Seconds() - stepSum); d > 1e-6 {
		t.Fatalf("phases sum to %vs, the step histogram to %vs", b.Steps().Seconds(), stepSum)
	}
	got := counterVec(t, reg, "tau2rl_sampler_busy_seconds_total")
	for phase, d := range map[string]time.Duration{PhaseDecode: b.Decode, PhasePrefill: b.Prefill, PhaseMixed: b.Mixed, PhaseWeightUpdate: b.WeightUpdate} {
		if math.Abs(got[phase]-d.Seconds()) > 1e-6 {
			t.Errorf("busy_seconds_total{phase=%q} = %v, Stats say %v", phase, got[phase], d.Seconds())
		}
	}
}
