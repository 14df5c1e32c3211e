package archiver_test

import (
	"context"
	"testing"
	"time"

	tkafka "tau2rl/consumers/kafka"
	"tau2rl/producers/synthetic"
)

func BenchmarkProbeReader(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	scfg := synthetic.DefaultConfig()
	scfg.Rate, scfg.Total, scfg.Batch = 0, b.N, 32
	w, _ := tkafka.NewWriter(e.kc, e.kc.Topics.Trajectories, nil)
	if _, err := synthetic.Run(ctx, scfg, w, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	r, _ := tkafka.NewGroupReader(e.kc, "probe", []string{e.kc.Topics.Trajectories}, nil)
	var first time.Time
	for i := 0; i < b.N; i++ {
		if _, err := r.Fetch(ctx); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			first = time.Now()
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msg/s")
	b.ReportMetric(float64(b.N-1)/time.Since(first).Seconds(), "steady-msg/s")
	b.ReportMetric(first.Sub(start).Seconds(), "join-s")
}
