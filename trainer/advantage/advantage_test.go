package advantage

import (
	"math"
	"strings"
	"testing"
)

func ep(reward float64, tokens ...int) Episode {
	e := Episode{Reward: reward}
	for _, t := range tokens {
		e.Calls = append(e.Calls, Call{LossTokens: t})
	}
	return e
}

func shaped(reward float64, calls ...float64) Episode {
	e := Episode{Reward: reward}
	for _, r := range calls {
		e.Calls = append(e.Calls, Call{LossTokens: 1, Shaped: &r})
	}
	return e
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*max(1, math.Abs(b)) }

func TestCompute(t *testing.T) {
	grpoNoStd := DefaultConfig()
	grpoNoStd.NormStd = false
	areal := ArealConfig()
	clip := ArealConfig()
	clip.Mode = ModeGRPO
	clip.NormStd = false
	cases := []struct {
		name   string
		cfg    Config
		groups []Group
		want   [][][]float64
	}{
		{
			// mean 0.5, unbiased std √(1/3); 0.5/(0.5773502691896258+1e-5) = 0.8660104040442419
			name:   "grpo std",
			cfg:    DefaultConfig(),
			groups: []Group{{Episodes: []Episode{ep(1, 5), ep(0, 5), ep(0, 5, 7), ep(1)}}},
			want:   [][][]float64{{{0.8660104040442419}, {-0.8660104040442419}, {-0.8660104040442419, -0.8660104040442419}, {}}},
		},
		{
			name:   "grpo mean only, two groups independent",
			cfg:    grpoNoStd,
			groups: []Group{{Episodes: []Episode{ep(1, 1), ep(0, 1), ep(0.5, 1)}}, {Episodes: []Episode{ep(0.2, 1), ep(0, 1)}}},
			want:   [][][]float64{{{0.5}, {-0.5}, {0}}, {{0.1}, {-0.1}}},
		},
		{
			// turn_discount γ = 0.9 on a 3-call success: calls carry 0.81, 0.9, 1; baseline is the
			// mean of episode rewards (0.5).
			name:   "grpo shaped calls",
			cfg:    grpoNoStd,
			groups: []Group{{Episodes: []Episode{shaped(1, 0.81, 0.9, 1), shaped(0, 0, 0)}}},
			want:   [][][]float64{{{0.31000000000000005, 0.4, 0.5}, {-0.5, -0.5}}},
		},
		{
			// r' = ±5; tokens 10 (+5), 30 (−5), 20 (+5): token mean 0, unbiased token std
			// √(1500/59) = 5.042194...; 5/(std+1e-5) = 0.9916296853801349.
			name: "areal batch token normalisation",
			cfg:  areal,
			groups: []Group{
				{Episodes: []Episode{ep(1, 10), ep(0, 30)}},
				{Episodes: []Episode{ep(1, 20)}},
			},
			want: [][][]float64{{{0.9916296853801349}, {-0.9916296853801349}}, {{0.9916296853801349}}},
		},
		{
			// (3 − 0.5)·10 = 25 → clipped to 20; (0 − 0.5)·10 = −5; baseline mean of the clipped
			// values 7.5.
			name:   "reward clip",
			cfg:    clip,
			groups: []Group{{Episodes: []Episode{ep(3, 1), ep(0, 1)}}},
			want:   [][][]float64{{{12.5}, {-12.5}}},
		},
		{
			name:   "single episode has zero spread",
			cfg:    DefaultConfig(),
			groups: []Group{{Episodes: []Episode{ep(1, 3)}}},
			want:   [][][]float64{{{0}}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.cfg.Compute(c.groups)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for g := range got {
				for e := range got[g] {
					if len(got[g][e]) != len(c.want[g][e]) {
						t.Fatalf("got %v, want %v", got, c.want)
					}
					for k := range got[g][e] {
						if !near(got[g][e][k], c.want[g][e][k]) {
							t.Fatalf("adv[%d][%d][%d] = %.17g, want %.17g", g, e, k, got[g][e][k], c.want[g][e][k])
						}
					}
				}
			}
		})
	}
}

// TestArealBatchMoments checks the defining property of batch normalisation: over the loss tokens
// of the batch the advantages have mean 0 and (unbiased) std ≈ 1.
func TestArealBatchMoments(t *testing.T) {
	groups := []Group{
		{Episodes: []Episode{ep(1, 3, 9), ep(0, 4), ep(0, 1, 1, 1)}},
		{Episodes: []Episode{ep(0.3, 17), shaped(1, 0.2, 0.7)}},
	}
	adv, err := ArealConfig().Compute(groups)
	if err != nil {
		t.Fatal(err)
	}
	var xs, ws []float64
	for g := range groups {
		for e, episode := range groups[g].Episodes {
			for c, call := range episode.Calls {
				xs = append(xs, adv[g][e][c])
				ws = append(ws, float64(call.LossTokens))
			}
		}
	}
	m := momentsOf(xs, ws, true)
	mean, std := m.mean(), math.Ldexp(m.sstd, m.exp)
	if math.Abs(mean) > 1e-12 || math.Abs(std-1) > 1e-4 {
		t.Fatalf("token mean %v std %v, want 0 and 1", mean, std)
	}
}

func TestFilter(t *testing.T) {
	calls := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	areal := ArealConfig()
	none := DefaultConfig()
	none.DropEqualRewards = false
	cases := []struct {
		name   string
		cfg    Config
		g      Group
		keep   bool
		reason string
	}{
		{"mixed", DefaultConfig(), Group{Episodes: []Episode{ep(1, 1), ep(0, 1)}}, true, ""},
		{"all zero", DefaultConfig(), Group{Episodes: []Episode{ep(0, 1), ep(0, 1)}}, false, "equal_rewards"},
		{"all one", DefaultConfig(), Group{Episodes: []Episode{ep(1, 1), ep(1, 2)}}, false, "equal_rewards"},
		{"equal kept when off", none, Group{Episodes: []Episode{ep(1, 1), ep(1, 2)}}, true, ""},
		{"empty", DefaultConfig(), Group{}, false, "empty"},
		// AReaL: call-weighted mean 19/20 = 0.95 ≤ 0.95 is kept; 20/21 > 0.95 is dropped;
		// all-failure groups are kept.
		{"areal at threshold", areal, Group{Episodes: []Episode{ep(1, calls(19)...), ep(0, 1)}}, true, ""},
		{"areal above", areal, Group{Episodes: []Episode{ep(1, calls(20)...), ep(0, 1)}}, false, "mean_above_max"},
		{"areal all fail kept", areal, Group{Episodes: []Episode{ep(0, 1), ep(0, 1)}}, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keep, reason := c.cfg.Filter(c.g)
			if keep != c.keep || reason != c.reason {
				t.Fatalf("Filter = %v %q, want %v %q", keep, reason, c.keep, c.reason)
			}
		})
	}
}

func TestComputeErrors(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name string
		cfg  Config
		g    []Group
		want string
	}{
		{"mode", Config{Mode: "ppo", RewardScaling: 1}, nil, "mode"},
		{"scaling", Config{Mode: ModeGRPO}, nil, "reward_scaling"},
		{"clip", Config{Mode: ModeGRPO, RewardScaling: 1, RewardClip: -1}, nil, "reward_clip"},
		{"nan reward", DefaultConfig(), []Group{{Episodes: []Episode{ep(nan, 1)}}}, "not finite"},
		{"nan shaped", DefaultConfig(), []Group{{Episodes: []Episode{shaped(1, nan)}}}, "shaped reward"},
		{"negative tokens", DefaultConfig(), []Group{{Episodes: []Episode{ep(1, -1)}}}, "negative loss tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.cfg.Compute(c.g)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}
