package shaping

import (
	"math"
	"testing"

	"tau2rl/schemas"
)

func traj(reward float64, invalid, calls int) *schemas.Trajectory {
	t := &schemas.Trajectory{Status: schemas.StatusOK, Reward: reward, InvalidFormatTurns: invalid}
	t.Calls = make([]schemas.LLMCall, calls)
	return t
}

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		reward  float64
		invalid int
		calls   int
		episode float64
		perCall []float64
	}{
		{"defaults success", DefaultConfig(), 1, 0, 3, 1, []float64{1, 1, 1}},
		{"one invalid turn", DefaultConfig(), 1, 1, 3, 0.9, []float64{0.9, 0.9, 0.9}},
		{"failure with two invalid turns", DefaultConfig(), 0, 2, 2, -0.2, []float64{-0.2, -0.2}},
		{"discount", Config{TurnDiscount: 0.5}, 1, 0, 4, 1, []float64{0.125, 0.25, 0.5, 1}},
		{"discount and penalty", Config{TurnDiscount: 0.9, InvalidFormatPenalty: 0.5}, 1, 1, 2, 0.5, []float64{0.45, 0.5}},
		{"chat mode, no calls", DefaultConfig(), 1, 1, 0, 0.9, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := traj(tc.reward, tc.invalid, tc.calls)
			Apply(tc.cfg, tr)
			Apply(tc.cfg, tr) // idempotent
			if math.Abs(tr.ShapedReward-tc.episode) > 1e-12 {
				t.Errorf("episode shaped %v, want %v", tr.ShapedReward, tc.episode)
			}
			if tr.Reward != tc.reward {
				t.Errorf("raw reward changed to %v", tr.Reward)
			}
			for i, want := range tc.perCall {
				if got := tr.Calls[i].ShapedReward; math.Abs(got-want) > 1e-12 {
					t.Errorf("call %d shaped %v, want %v", i, got, want)
				}
			}
		})
	}
}

func TestInfraErrorUntouched(t *testing.T) {
	tr := traj(0, 3, 2)
	tr.Status, tr.Error = schemas.StatusInfraError, "x"
	Apply(DefaultConfig(), tr)
	if tr.ShapedReward != 0 || tr.Calls[0].ShapedReward != 0 {
		t.Errorf("infra error shaped: %+v", tr)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{{TurnDiscount: 0}, {TurnDiscount: 1.5}, {TurnDiscount: 1, InvalidFormatPenalty: -1}, {TurnDiscount: math.NaN()}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}
