// Package advantage turns episode rewards into per-call advantages for the policy-gradient loss,
// and decides which groups are worth training on.
//
// Two estimators are supported, because the shipped AReaL τ² example and the paper recipe
// disagree (see docs/AREAL.md §1.3, §5.3):
//
//   - "grpo" (default): group-relative. Within the group of n episodes of one task the baseline is
//     the mean of the (transformed) episode rewards, optionally divided by the group's standard
//     deviation (+ eps). Each episode counts once, however many calls it made.
//   - "areal": AReaL HEAD's practice. Each call's reward is transformed
//     r' = clip((r + reward_bias)·reward_scaling, ±reward_clip) — (r − 0.5)·10 clipped at ±20 in
//     the τ² configs — and every loss token of the call gets r' (GAE with γ = λ = 1, no critic);
//     then advantages are normalised over all loss tokens of the whole step batch: the mean and
//     the unbiased standard deviation are token-weighted, and adv = (r' − mean)/(std + eps). The
//     group is used only for filtering.
//
// Per-call shaped rewards (the producer's turn_discount: call i of N gets γ^(N−1−i)·R) replace
// the episode reward of their call when present; the grpo baseline and spread still come from the
// episode rewards, so with γ = 1 both are the same.
//
// Filtering (AReaL's dynamic filter, configurable): a group whose raw rewards are all equal gives
// every episode a zero group-relative advantage, so it is dropped by default; optionally a group
// whose call-weighted mean raw reward exceeds max_mean_reward is dropped (AReaL HEAD keeps a group
// only if that mean ≤ 0.95).
//
// Finite rewards always give finite advantages, however large or small (issue 27: a group with
// rewards [1e308, 1e308, 0, 0] overflowed the group mean and made every advantage NaN). Means
// and standard deviations are computed on the values scaled by a power of two that brings the
// largest magnitude into [0.5, 1): the scaling is exact, so ordinary rewards give bit for bit the
// advantages of the plain formulas, and extreme ones cannot overflow. A transformed reward beyond
// the float64 range saturates at ±math.MaxFloat64; a standard deviation of zero (one episode, or
// equal rewards kept with eps = 0) gives advantage 0, not 0/0; and advantages are clamped to
// ±math.MaxFloat32 because the loss trains on float32 (only reachable without std normalisation).
// Rewards that large are refused earlier anyway (schemas.MaxAbsReward).
package advantage

import (
	"fmt"
	"math"
)

// Estimator names accepted in Config.Mode.
const (
	ModeGRPO  = "grpo"
	ModeAReaL = "areal"
)

// Config selects and parameterises the estimator.
type Config struct {
	// Mode is "grpo" (default) or "areal".
	Mode string `yaml:"mode"`
	// RewardBias is added to a raw reward before scaling. Default 0 (AReaL τ²: −0.5).
	RewardBias float64 `yaml:"reward_bias"`
	// RewardScaling multiplies the biased reward. Default 1 (AReaL τ²: 10).
	RewardScaling float64 `yaml:"reward_scaling"`
	// RewardClip clips the transformed reward to ±RewardClip; 0 disables. Default 0 (AReaL: 20).
	RewardClip float64 `yaml:"reward_clip"`
	// NormStd divides by the standard deviation: the group's in grpo mode, the batch's
	// token-weighted one in areal mode. Default true.
	NormStd bool `yaml:"norm_std"`
	// Eps is added to the standard deviation before dividing. Default 1e-5 (AReaL adv_norm).
	Eps float64 `yaml:"eps"`
	// Unbiased uses the n−1 (Bessel) denominator for standard deviations, as torch.std and AReaL
	// do. Default true.
	Unbiased bool `yaml:"unbiased"`
	// DropEqualRewards drops groups whose raw episode rewards are all equal. Default true.
	DropEqualRewards bool `yaml:"drop_equal_rewards"`
	// MaxMeanReward drops groups whose call-weighted mean raw reward exceeds it; 0 disables.
	// Default 0 (AReaL HEAD: 0.95).
	MaxMeanReward float64 `yaml:"max_mean_reward"`
}

// DefaultConfig returns GRPO with group std normalisation and the equal-rewards filter.
func DefaultConfig() Config {
	return Config{Mode: ModeGRPO, RewardScaling: 1, NormStd: true, Eps: 1e-5, Unbiased: true, DropEqualRewards: true}
}

// ArealConfig returns AReaL HEAD's τ² settings: reward (r − 0.5)·10 clipped at ±20, batch-level
// token-weighted mean/std normalisation, groups kept while their call-weighted mean reward ≤ 0.95
// (all-failure groups are kept: batch normalisation still gives them negative advantages).
func ArealConfig() Config {
	return Config{Mode: ModeAReaL, RewardBias: -0.5, RewardScaling: 10, RewardClip: 20, NormStd: true,
		Eps: 1e-5, Unbiased: true, MaxMeanReward: 0.95}
}

// Validate reports settings that would produce meaningless advantages.
func (c Config) Validate() error {
	if c.Mode != ModeGRPO && c.Mode != ModeAReaL {
		return fmt.Errorf("advantage: mode %q: want %q or %q", c.Mode, ModeGRPO, ModeAReaL)
	}
	if !(c.RewardScaling > 0) || math.IsInf(c.RewardScaling, 0) {
		return fmt.Errorf("advantage: reward_scaling must be a positive number, got %v", c.RewardScaling)
	}
	if c.RewardClip < 0 || math.IsNaN(c.RewardClip) {
		return fmt.Errorf("advantage: reward_clip must be ≥ 0, got %v", c.RewardClip)
	}
	if c.Eps < 0 || math.IsNaN(c.Eps) || math.IsNaN(c.RewardBias) || math.IsInf(c.RewardBias, 0) {
		return fmt.Errorf("advantage: eps (%v) must be ≥ 0 and reward_bias (%v) finite", c.Eps, c.RewardBias)
	}
	if c.MaxMeanReward < 0 || math.IsNaN(c.MaxMeanReward) {
		return fmt.Errorf("advantage: max_mean_reward must be ≥ 0, got %v", c.MaxMeanReward)
	}
	return nil
}

// Call is what the estimator needs of one policy LLM call.
type Call struct {
	// LossTokens is the number of tokens of the call that carry loss (areal mode weights its
	// batch statistics by it).
	LossTokens int
	// Shaped is the call's shaped reward when the producer set one (turn_discount); nil means the
	// episode reward.
	Shaped *float64
}

// Episode is one member of a group.
type Episode struct {
	Reward float64
	Calls  []Call
}

// Group is the episodes of one task that are normalised together.
type Group struct {
	Episodes []Episode
}

// callReward is the raw reward of call c of episode e.
func callReward(e Episode, c Call) float64 {
	if c.Shaped != nil {
		return *c.Shaped
	}
	return e.Reward
}

// Filter reports whether g should be trained on and, if not, why (a short metric label).
func (c Config) Filter(g Group) (keep bool, reason string) {
	if len(g.Episodes) == 0 {
		return false, "empty"
	}
	if c.DropEqualRewards {
		equal := true
		for _, e := range g.Episodes[1:] {
			if e.Reward != g.Episodes[0].Reward {
				equal = false
				break
			}
		}
		if equal {
			return false, "equal_rewards"
		}
	}
	if c.MaxMeanReward > 0 {
		var xs, ws []float64
		for _, e := range g.Episodes {
			for _, call := range e.Calls {
				xs, ws = append(xs, callReward(e, call)), append(ws, 1)
			}
		}
		if len(xs) > 0 && momentsOf(xs, ws, false).mean() > c.MaxMeanReward {
			return false, "mean_above_max"
		}
	}
	return true, ""
}

// transform applies bias, scaling and clipping to a raw reward. A result beyond the float64
// range saturates at ±math.MaxFloat64 (before clipping), so a finite reward stays finite.
func (c Config) transform(r float64) float64 {
	r = (r + c.RewardBias) * c.RewardScaling
	if math.IsInf(r, 0) {
		r = math.Copysign(math.MaxFloat64, r)
	}
	if c.RewardClip > 0 {
		r = max(-c.RewardClip, min(c.RewardClip, r))
	}
	return r
}

// Compute returns the advantage of every call: out[g][e][c] for call c of episode e of group g.
// Every token of a call shares its call's advantage. Rewards must be finite.
func (c Config) Compute(groups []Group) ([][][]float64, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	out := make([][][]float64, len(groups))
	for gi, g := range groups {
		out[gi] = make([][]float64, len(g.Episodes))
		for ei, e := range g.Episodes {
			if math.IsNaN(e.Reward) || math.IsInf(e.Reward, 0) {
				return nil, fmt.Errorf("advantage: group %d episode %d: reward %v is not finite", gi, ei, e.Reward)
			}
			out[gi][ei] = make([]float64, len(e.Calls))
			for ci, call := range e.Calls {
				r := callReward(e, call)
				if math.IsNaN(r) || math.IsInf(r, 0) {
					return nil, fmt.Errorf("advantage: group %d episode %d call %d: shaped reward %v is not finite", gi, ei, ci, r)
				}
				if call.LossTokens < 0 {
					return nil, fmt.Errorf("advantage: group %d episode %d call %d: negative loss tokens %d", gi, ei, ci, call.LossTokens)
				}
				out[gi][ei][ci] = c.transform(r)
			}
		}
	}
	if c.Mode == ModeGRPO {
		for gi, g := range groups {
			rs := make([]float64, len(g.Episodes))
			ws := make([]float64, len(g.Episodes))
			for ei, e := range g.Episodes {
				rs[ei], ws[ei] = c.transform(e.Reward), 1
			}
			m := momentsOf(rs, ws, c.Unbiased)
			for ei := range out[gi] {
				for ci := range out[gi][ei] {
					out[gi][ei][ci] = c.normalise(out[gi][ei][ci], m)
				}
			}
		}
		return out, nil
	}
	var rs, ws []float64
	for gi, g := range groups {
		for ei, e := range g.Episodes {
			for ci, call := range e.Calls {
				rs = append(rs, out[gi][ei][ci])
				ws = append(ws, float64(call.LossTokens))
			}
		}
	}
	m := momentsOf(rs, ws, c.Unbiased)
	for gi := range out {
		for ei := range out[gi] {
			for ci := range out[gi][ei] {
				out[gi][ei][ci] = c.normalise(out[gi][ei][ci], m)
			}
		}
	}
	return out, nil
}

// normalise returns x's advantage, (x − mean) or (x − mean)/(std + eps), computed on the scaled
// values so that neither the difference nor the spread overflows (see the package doc).
func (c Config) normalise(x float64, m moments) float64 {
	d := math.Ldexp(x, -m.exp) - m.smean // |d| ≤ 2: both terms are in [−1, 1]
	var a float64
	if c.NormStd {
		den := m.sstd + math.Ldexp(c.Eps, -m.exp) // +Inf when eps/2^exp overflows: advantage 0
		if den == 0 {
			return 0 // no spread (one episode, or equal rewards with eps 0): no signal
		}
		a = d / den
	} else {
		a = math.Ldexp(d, m.exp)
	}
	return max(-math.MaxFloat32, min(math.MaxFloat32, a))
}

// moments are a weighted mean and standard deviation of values scaled by 2^−exp (smean, sstd),
// with exp chosen so that the largest magnitude scales into [0.5, 1): every value, the mean and
// the deviations then lie in [−2, 2] and nothing overflows, while scaling by a power of two is
// exact, so smean·2^exp and sstd·2^exp are what the plain formulas give whenever those do not
// overflow.
type moments struct {
	smean, sstd float64
	exp         int
}

// mean is the unscaled weighted mean (finite: |mean| ≤ the largest |x|).
func (m moments) mean() float64 { return math.Ldexp(m.smean, m.exp) }

// momentsOf returns the moments of xs (weights are counts: a weight of k stands for k equal
// observations; values of weight 0 do not set the scale). The unbiased variant divides by Σw − 1;
// with Σw ≤ 1 the spread is 0. xs must be finite.
func momentsOf(xs, ws []float64, unbiased bool) moments {
	var big float64
	for i, x := range xs {
		if ws[i] > 0 {
			big = max(big, math.Abs(x))
		}
	}
	var m moments
	if big == 0 {
		return m
	}
	_, m.exp = math.Frexp(big)
	var n, sum float64
	for i, x := range xs {
		n += ws[i]
		sum += ws[i] * math.Ldexp(x, -m.exp)
	}
	m.smean = sum / n
	var ss float64
	for i, x := range xs {
		d := math.Ldexp(x, -m.exp) - m.smean
		ss += ws[i] * d * d
	}
	den := n
	if unbiased {
		den = n - 1
	}
	if den > 0 {
		m.sstd = math.Sqrt(ss / den)
	}
	return m
}
