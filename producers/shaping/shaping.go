// Package shaping applies the reward shaping that AReaL's τ² example names
// (econfig.invalid_format_penalty, turn_discount) but never applies: both
// knobs are read by nothing there (docs/AREAL.md §1.3). τ²'s raw reward
// stays in Trajectory.Reward; the shaped values go to
// Trajectory.ShapedReward and LLMCall.ShapedReward, so both are recorded and
// the trainer chooses.
//
// The exact rule, for an episode with τ² reward R, k invalid-format policy
// turns and N policy calls (i = 0 … N−1 in call order):
//
//	R' = R − invalid_format_penalty · k             (episode; not clipped)
//	r_i = turn_discount^(N−1−i) · R'                (call i)
//
// So with the defaults (penalty 0.1, γ = 1) a successful episode with one
// malformed tool call scores 0.9 on every call, and a failed one −0.1. The
// last call always carries R'; with γ < 1 earlier calls get geometrically
// less, exactly AReaL's InteractionCache.apply_reward_discount (reverse
// creation order, cur = cur·γ + r_i, only the last interaction rewarded).
// An invalid-format turn is one whose completion chattemplate.ParseCompletion
// rejects (or an empty completion); in chat mode, where nothing is recorded
// per call, k counts turns whose tool-call arguments were not a JSON object
// or that were empty, and only the episode value is set.
//
// Trajectories with status infra_error are left alone: they carry no reward.
package shaping

import (
	"fmt"
	"math"

	"tau2rl/schemas"
)

// Config holds the two knobs (the values of econfig).
type Config struct {
	// TurnDiscount γ in (0, 1]. Default 1.
	TurnDiscount float64 `yaml:"turn_discount"`
	// InvalidFormatPenalty ≥ 0, subtracted per invalid-format turn.
	// Default 0.1.
	InvalidFormatPenalty float64 `yaml:"invalid_format_penalty"`
}

// DefaultConfig returns AReaL's defaults.
func DefaultConfig() Config { return Config{TurnDiscount: 1, InvalidFormatPenalty: 0.1} }

// Validate checks the ranges.
func (c Config) Validate() error {
	if !(c.TurnDiscount > 0 && c.TurnDiscount <= 1) {
		return fmt.Errorf("shaping: turn_discount %v must be in (0, 1]", c.TurnDiscount)
	}
	if !(c.InvalidFormatPenalty >= 0) || math.IsInf(c.InvalidFormatPenalty, 0) {
		return fmt.Errorf("shaping: invalid_format_penalty %v must be a finite number ≥ 0", c.InvalidFormatPenalty)
	}
	return nil
}

// Apply sets t.ShapedReward and every call's ShapedReward from t.Reward and
// t.InvalidFormatTurns. It is idempotent.
func Apply(c Config, t *schemas.Trajectory) {
	if t.Status != schemas.StatusOK {
		return
	}
	shaped := t.Reward - c.InvalidFormatPenalty*float64(t.InvalidFormatTurns)
	t.ShapedReward = shaped
	n := len(t.Calls)
	w := 1.0
	for i := n - 1; i >= 0; i-- {
		t.Calls[i].ShapedReward = w * shaped
		w *= c.TurnDiscount
	}
}
