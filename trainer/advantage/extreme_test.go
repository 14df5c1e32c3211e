package advantage

import (
	"math"
	"testing"
)

// finiteAll fails the test when any advantage is NaN or infinite, or beyond float32 (the loss
// trains on float32 advantages).
func finiteAll(t *testing.T, out [][][]float64) {
	t.Helper()
	for gi := range out {
		for ei := range out[gi] {
			for ci, a := range out[gi][ei] {
				if math.IsNaN(a) || math.IsInf(a, 0) || math.Abs(a) > math.MaxFloat32 {
					t.Fatalf("advantage [%d][%d][%d] = %v from finite rewards", gi, ei, ci, a)
				}
			}
		}
	}
}

// TestComputeExtremeRewards (issue 27 item 2): a group with rewards [1e308, 1e308, 0, 0]
// overflowed the group mean to +Inf and every advantage became NaN, which the loss rejects, and
// the trainer exited on every restart. Finite rewards must give finite advantages in every mode,
// and where the scale cancels (std normalisation) the same advantages as the same rewards at unit
// scale.
func TestComputeExtremeRewards(t *testing.T) {
	noStd := DefaultConfig()
	noStd.NormStd = false
	noEps := DefaultConfig()
	noEps.Eps = 0
	noEps.DropEqualRewards = false
	arealNoClip := ArealConfig()
	arealNoClip.RewardClip = 0
	arealNoClip.RewardScaling = 1e300
	huge := math.MaxFloat64
	tiny := math.SmallestNonzeroFloat64
	group := func(rs ...float64) []Group {
		g := Group{}
		for _, r := range rs {
			g.Episodes = append(g.Episodes, ep(r, 3, 2))
		}
		return []Group{g}
	}
	for _, c := range []struct {
		name   string
		cfg    Config
		groups []Group
		// like, when set, gives rewards whose advantages must match (scale invariance).
		like []Group
	}{
		{"grpo 1e308 pair", DefaultConfig(), group(1e308, 1e308, 0, 0), group(1, 1, 0, 0)},
		{"grpo ±1e308", DefaultConfig(), group(1e308, -1e308, 1e308, -1e308), group(1, -1, 1, -1)},
		{"grpo ±MaxFloat64", DefaultConfig(), group(huge, -huge), group(1, -1)},
		{"grpo MaxFloat64 thrice", DefaultConfig(), group(huge, huge, huge, 0), group(1, 1, 1, 0)},
		{"grpo subnormals", DefaultConfig(), group(tiny, 0, tiny, 0), nil},
		{"grpo subnormal and huge", DefaultConfig(), group(tiny, huge, 0, -huge), nil},
		{"grpo no std ±1e308", noStd, group(1e308, -1e308), nil},
		{"grpo no std MaxFloat64", noStd, group(huge, 0, 0, 0), nil},
		{"grpo eps 0 equal rewards", noEps, group(0.5, 0.5, 0.5), nil},
		{"grpo eps 0 one episode", noEps, group(1), nil},
		{"areal ±MaxFloat64", ArealConfig(), group(huge, -huge, 0, 1), nil},
		{"areal unclipped overflow", arealNoClip, group(1e308, 0, -1e308, 1), nil},
		{"areal unclipped MaxFloat64", arealNoClip, group(huge, huge, 0, 0), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.cfg.Compute(c.groups)
			if err != nil {
				t.Fatal(err)
			}
			finiteAll(t, out)
			if c.like == nil {
				return
			}
			cfg := c.cfg
			cfg.Eps = 0 // at 1e308 the eps term vanishes; compare with the exact ratio
			want, err := cfg.Compute(c.like)
			if err != nil {
				t.Fatal(err)
			}
			for ei := range want[0] {
				for ci := range want[0][ei] {
					if a, w := out[0][ei][ci], want[0][ei][ci]; math.Abs(a-w) > 1e-9 {
						t.Fatalf("episode %d call %d: %v, want %v as at unit scale", ei, ci, a, w)
					}
				}
			}
		})
	}
}

// TestFilterExtremeRewards: the call-weighted mean of max_mean_reward must not overflow either
// (a sum of ±1e308 is NaN and compares false, so the group was kept whatever its mean).
func TestFilterExtremeRewards(t *testing.T) {
	cfg := ArealConfig()
	for _, c := range []struct {
		rs   []float64
		keep bool
	}{
		{[]float64{1e308, 1e308, 0, 0}, false}, // mean 5e307 > 0.95
		{[]float64{math.MaxFloat64, -math.MaxFloat64, 0, -1}, true},
		{[]float64{math.MaxFloat64, math.MaxFloat64}, false},
		{[]float64{-math.MaxFloat64, 0}, true},
	} {
		g := Group{}
		for _, r := range c.rs {
			g.Episodes = append(g.Episodes, ep(r, 1))
		}
		if keep, reason := cfg.Filter(g); keep != c.keep {
			t.Errorf("%v: keep %v (%s), want %v", c.rs, keep, reason, c.keep)
		}
	}
}

// FuzzCompute: any finite rewards, shaped rewards and token counts give finite advantages.
func FuzzCompute(f *testing.F) {
	f.Add(1e308, 1e308, 0.0, 0.0, uint16(3), true, false)
	f.Add(math.MaxFloat64, -math.MaxFloat64, 5e-324, 1.0, uint16(0), false, true)
	f.Fuzz(func(t *testing.T, a, b, c, d float64, tokens uint16, areal, noStd bool) {
		cfg := DefaultConfig()
		if areal {
			cfg = ArealConfig()
			cfg.RewardClip = 0
		}
		cfg.NormStd = !noStd
		for _, r := range []float64{a, b, c, d} {
			if math.IsNaN(r) || math.IsInf(r, 0) {
				return
			}
		}
		g := Group{Episodes: []Episode{ep(a, int(tokens)), ep(b, 1, int(tokens)), shaped(c, d, a), ep(d)}}
		out, err := cfg.Compute([]Group{g})
		if err != nil {
			t.Fatal(err)
		}
		finiteAll(t, out)
		cfg.Filter(g)
	})
}
