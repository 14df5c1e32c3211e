package step

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"tau2rl/schemas/steplog"
)

// slowSource delivers its messages one every gap, so the trainer waits for batches.
type slowSource struct {
	*memSource
	gap time.Duration
}

func (s slowSource) Next(ctx context.Context) (Message, error) {
	select {
	case <-time.After(s.gap):
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
	return s.memSource.Next(ctx)
}

// slowReloader takes delay per reload, as servers loading a checkpoint do.
type slowReloader struct {
	recorder
	delay time.Duration
}

func (r *slowReloader) LoadWeights(ctx context.Context, path string, v int64) error {
	time.Sleep(r.delay)
	return r.recorder.LoadWeights(ctx, path, v)
}

// TestBusySecondsAddUp: over a run whose source is slow and whose servers take time to reload,
// every busy phase is counted, they sum to no more than the run's wall time, train covers the
// build, pack and train histograms exactly, weight_sync covers the reloads, waiting covers the
// wait for the first message, and each step record carries staleness_mean beside staleness_max.
func TestBusySecondsAddUp(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxSteps = 2
	cfg.Actor.RecomputeLogprob = true
	const gap, delay = 10 * time.Millisecond, 15 * time.Millisecond
	msgs := groupMessages(t, []string{"0", "1", "2", "3"}, 0, 0)
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rl := &slowReloader{delay: delay}
	tr, err := New(cfg, Deps{Backend: newBackend(t), Source: slowSource{newMemSource(msgs), gap}, Reloader: rl, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runTrainer(t, tr)
	wall := time.Since(start).Seconds()

	busy := map[string]float64{}
	var sum float64
	for _, p := range BusyPhases {
		busy[p] = testutil.ToFloat64(m.BusySeconds.WithLabelValues(p))
		sum += busy[p]
		if busy[p] <= 0 {
			t.Errorf("phase %s never counted", p)
		}
	}
	if sum > wall {
		t.Fatalf("busy phases sum to %.4fs over a run of %.4fs: %v", sum, wall, busy)
	}
	if want := float64(len(rl.reloads)) * delay.Seconds(); busy[BusyWeightSync] < want {
		t.Errorf("weight_sync %.4fs, want ≥ %.4fs (%d reloads of %v)", busy[BusyWeightSync], want, len(rl.reloads), delay)
	}
	// Until the first message nothing can run (later gaps overlap training: the source is read
	// by its own goroutine).
	if busy[BusyWaiting] < gap.Seconds() {
		t.Errorf("waiting %.4fs, want ≥ the first message's %v", busy[BusyWaiting], gap)
	}
	var hist float64
	for _, p := range []string{"build", "pack", "train"} {
		var pb dto.Metric
		if err := m.PhaseSeconds.WithLabelValues(p).(prometheus.Metric).Write(&pb); err != nil {
			t.Fatal(err)
		}
		hist += pb.GetHistogram().GetSampleSum()
	}
	if d := busy[BusyTrain] - hist; d > 1e-9 || d < -1e-9 {
		t.Errorf("train %.6fs, the build+pack+train histograms %.6fs", busy[BusyTrain], hist)
	}
	recs, err := steplog.Read(filepath.Join(cfg.Checkpoint.Dir, steplog.FileName))
	if err != nil || len(recs) != 2 {
		t.Fatalf("step log: %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if _, ok := r.Metrics["staleness_mean"]; !ok {
			t.Errorf("step %d: no staleness_mean in %v", r.Step, r.Metrics)
		}
	}
}
