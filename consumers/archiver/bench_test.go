package archiver_test

import (
	"context"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"time"

	dto "github.com/prometheus/client_model/go"

	"tau2rl/consumers/archiver"
	"tau2rl/lib/cputime"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/producers/synthetic"
	"tau2rl/schemas"
)

// BenchmarkEndToEnd measures the streaming backbone on this machine, all in
// one process as on a 2-core box: the synthetic producer (30 policy calls,
// 8k-token context per trajectory) publishes b.N trajectories through the
// embedded broker (with a data directory) while the archiver writes them to
// Parquet (zstd) and commits. Reported: trajectories/s from the first
// publish until every offset is committed, MB/s of Arrow payload, and the
// process's peak heap, its growth during the run, and CPU time per
// trajectory (the machine-independent capacity: 2 cores / cpu-ms).
//
//	go test -run '^$' -bench EndToEnd -benchtime 2000x ./consumers/archiver
//
// "archive-only" pre-publishes the trajectories and times the archiver alone.
// The "-zipf" variants draw token ids from a Zipf law instead of uniformly
// (schemas.SyntheticOptions.TokenDistribution): uniform ids are
// incompressible, real Qwen3 token streams are not; both are synthetic.
func BenchmarkEndToEnd(b *testing.B) {
	b.Run("streaming", func(b *testing.B) { benchEndToEnd(b, false, schemas.TokensUniform) })
	b.Run("streaming-zipf", func(b *testing.B) { benchEndToEnd(b, false, schemas.TokensZipf) })
	b.Run("archive-only", func(b *testing.B) { benchEndToEnd(b, true, schemas.TokensUniform) })
	b.Run("archive-only-zipf", func(b *testing.B) { benchEndToEnd(b, true, schemas.TokensZipf) })
}

func benchEndToEnd(b *testing.B, prepublish bool, tokens string) {
	e := newEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	scfg := synthetic.DefaultConfig()
	scfg.Rate = 0
	scfg.Total = b.N
	scfg.Batch = 32
	scfg.Trajectory.TokenDistribution = tokens
	w, err := tkafka.NewWriter(e.kc, e.kc.Topics.Trajectories, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	// The pool of base trajectories is generated before the clock starts: a
	// producer pays it once at start-up, not per trajectory.
	src, err := synthetic.NewSource(scfg)
	if err != nil {
		b.Fatal(err)
	}
	var bytesOut atomic.Int64
	produce := func() error {
		st, err := synthetic.RunSource(ctx, src, w, nil, nil)
		bytesOut.Store(st.Bytes)
		return err
	}
	if prepublish {
		if err := produce(); err != nil {
			b.Fatal(err)
		}
	}
	cfg := archiver.DefaultConfig()
	cfg.DatasetDir = filepath.Join(b.TempDir(), "ds")
	cfg.Roll.MaxAge = time.Second
	cfg.CommitInterval = 100 * time.Millisecond

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peakHeap atomic.Uint64
	stopSample := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			select {
			case <-stopSample:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	defer close(stopSample)

	b.ResetTimer()
	cpu0 := cputime.Now()
	start := time.Now()
	am, _ := archiver.NewMetrics(nil)
	a, err := archiver.OpenKafka(ctx, cfg, e.kc, archiver.Deps{Metrics: am, Log: testLog}, nil)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := runAsync(runCtx, a)
	prodErr := make(chan error, 1)
	if !prepublish {
		go func() { prodErr <- produce() }()
	} else {
		prodErr <- nil
	}
	if err := <-prodErr; err != nil {
		b.Fatal(err)
	}
	waitCommitted(b, ctx, e, cfg.Group)
	elapsed := time.Since(start)
	cpu := cputime.Now() - cpu0
	b.StopTimer()
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if a.Summary.Rows != b.N {
		b.Fatalf("archived %d rows, want %d", a.Summary.Rows, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "traj/s")
	b.ReportMetric(float64(bytesOut.Load())/elapsed.Seconds()/1e6, "arrowMB/s")
	b.ReportMetric(float64(a.Summary.FileBytes)/float64(b.N), "parquetB/traj")
	b.ReportMetric(float64(bytesOut.Load())/float64(b.N), "arrowB/traj")
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peakHeapMB")
	b.ReportMetric(float64(peakHeap.Load()-min(peakHeap.Load(), base.HeapInuse))/(1<<20), "heapGrowthMB")
	// CPU seconds of the whole process (producer, broker, archiver) per
	// trajectory: 2/cpu is the rate two dedicated cores would sustain,
	// whatever else shares the machine while the benchmark runs.
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/traj")
	var fin dto.Metric
	if err := am.FinalizeLatency.Write(&fin); err == nil {
		b.ReportMetric(fin.GetHistogram().GetSampleSum(), "finalize-s")
	}
}
