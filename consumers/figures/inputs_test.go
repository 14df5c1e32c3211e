package figures

import (
	"math"
	"os"
	"testing"
)

// FuzzParseReport: report.json comes from another machine; parsing must never panic, and what it
// accepts has a reward point per version with a band around its mean and equal-length series.
func FuzzParseReport(f *testing.F) {
	b, err := os.ReadFile("testdata/report.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, 4)
	f.Add([]byte(`{"grpo": {"reward_per_version": [{"version": 0, "episodes": 1, "mean_reward": 0.5, "std": 0}]}}`), 1)
	f.Add([]byte(`{"grpo": {"reward_per_version": []}}`), 0)
	f.Add([]byte(`[]`), 8)
	f.Fuzz(func(t *testing.T, data []byte, maxK int) {
		in, _, err := ParseReport(data, maxK)
		if err != nil {
			return
		}
		if len(in.Reward) == 0 {
			t.Fatal("accepted a report without reward points")
		}
		for _, p := range in.Reward {
			if p.N < 1 || !(p.Lo <= p.Y && p.Y <= p.Hi) && !math.IsNaN(p.Y) {
				t.Fatalf("point %+v", p)
			}
		}
		for _, pk := range in.PassK {
			if len(pk.PassK) == 0 || len(pk.PassK) > max(maxK, 1) {
				t.Fatalf("pass^k %v with max_k %d", pk.PassK, maxK)
			}
		}
	})
}
