// Package loss holds the training objectives: a loss over a packed prefix-tree micro-batch and
// its gradient with respect to the per-node log-probs, which is what gpu.Backend.Backward takes.
//
// Every trainer reaches an objective through one interface, Objective (Input in: the micro-batch,
// the sequences' advantages and behaviour log-probs, the current and proximal log-probs, the
// normaliser; Result out: loss, per-node gradient, Stats), built by New from Config.Objective
// out of the registry (registry.go). trainer/step (one GPU, data-parallel ranks, and through
// trainer/feed the other hosts) runs actor.objective, trainer/sft runs "nll". A new objective is
// one file here and one Register line in registry.go (docs/ARCHITECTURE.md, "Where new things go").
//
// The default, "ppo", is AReaL's decoupled PPO actor loss. For every loss token (a reference r of node c to token t of sequence s, see prefixtree):
//
//	ratio   = exp(logp[c] − prox[c])                 current policy / proximal policy
//	pg      = max(−A·ratio, −A·clip(ratio, 1−ε, 1+ε_high))
//	w       = exp(prox[c] − behav_r)                 proximal / behaviour importance weight
//	w       = 0 if w > cap                           tokens too far off-policy are masked out
//	loss    = Σ_r pg_r · w_r / N                     N = loss tokens of the whole (mini)batch
//
// exactly as areal/utils/functional ppo_actor_loss_fn with use_decoupled_loss and
// behav_imp_weight_cap: behaviour log-probs come from the producer (what the inference server
// sampled with), proximal log-probs are recomputed by the trainer before the update, masked
// tokens still count in N (AReaL divides by the original loss-mask count), there is no KL term.
//
// The proximal log-prob is a property of the node — every sequence through a node sees the same
// context — while advantages and behaviour log-probs belong to the sequence, so the gradient of a
// node is the sum of its references' gradients: the same gradient as training each sequence
// separately.
package loss

import (
	"fmt"
	"math"

	"tau2rl/trainer/prefixtree"
)

// Config holds the loss settings, with AReaL's names: which objective, and the PPO knobs.
type Config struct {
	// Objective names the registered objective the trainer optimises (registry.go): "ppo"
	// (AReaL's decoupled PPO, GRPO's objective) or "nll"; "" is "ppo". Default "ppo".
	Objective string `yaml:"objective"`
	// EpsClip is the ratio clip ε: ratios are clipped to [1−ε, 1+ε]. Default 0.4 (AReaL τ²).
	EpsClip float64 `yaml:"eps_clip"`
	// EpsClipHigher, when > 0, replaces ε on the upper side (decoupled clip). Default 0 (unset).
	EpsClipHigher float64 `yaml:"eps_clip_higher"`
	// BehavImpWeightCap masks tokens whose proximal/behaviour importance weight exceeds it; 0
	// disables the cap. Default 5 (AReaL τ²).
	BehavImpWeightCap float64 `yaml:"behav_imp_weight_cap"`
}

// DefaultConfig returns AReaL's τ² settings.
func DefaultConfig() Config {
	return Config{Objective: ObjectivePPO, EpsClip: 0.4, BehavImpWeightCap: 5}
}

// objective is c.Objective with "" read as the default, so a zero Config (and a step from a
// leader that predates the field) means PPO.
func (c Config) objective() string {
	if c.Objective == "" {
		return ObjectivePPO
	}
	return c.Objective
}

// Validate checks that the objective is registered and that the settings it reads are valid
// (New's check).
func (c Config) Validate() error {
	_, err := New(c)
	return err
}

// validatePPO rejects clip settings outside (0, 1) for the lower side, or negative ones.
func (c Config) validatePPO() error {
	if !(c.EpsClip > 0 && c.EpsClip < 1) {
		return fmt.Errorf("loss: eps_clip must be in (0, 1), got %v", c.EpsClip)
	}
	if c.EpsClipHigher < 0 || math.IsNaN(c.EpsClipHigher) || math.IsInf(c.EpsClipHigher, 0) {
		return fmt.Errorf("loss: eps_clip_higher must be ≥ 0, got %v", c.EpsClipHigher)
	}
	if c.BehavImpWeightCap < 0 || math.IsNaN(c.BehavImpWeightCap) {
		return fmt.Errorf("loss: behav_imp_weight_cap must be ≥ 0, got %v", c.BehavImpWeightCap)
	}
	return nil
}

func (c Config) bounds() (lo, hi float64) {
	hi = 1 + c.EpsClip
	if c.EpsClipHigher > 0 {
		hi = 1 + c.EpsClipHigher
	}
	return 1 - c.EpsClip, hi
}

// Seq is what the loss needs of one packed sequence: the advantage and behaviour log-prob of each
// token in [Offset, Offset+len(Adv)), which must cover the sequence's loss tokens.
type Seq struct {
	Offset int32
	Adv    []float32
	Behav  []float32
}

// Stats accumulates loss metrics over micro-batches. Means divide the sums by Tokens.
type Stats struct {
	Tokens      int64   // loss tokens seen
	Loss        float64 // Σ pg·w / N, summed over micro-batches: the minibatch loss
	ClipCount   int64   // tokens where the clipped objective was taken (AReaL clip_mask)
	CapMasked   int64   // tokens masked by behav_imp_weight_cap
	EntropySum  float64 // Σ entropy of the token distributions
	ApproxKLSum float64 // Σ (logp − prox)
	RatioSum    float64 // Σ exp(logp − prox)
	BehavWSum   float64 // Σ behaviour importance weight after masking
	BehavWMax   float64 // max behaviour importance weight before masking
	BehavKLSum  float64 // Σ (prox − behav) over unmasked tokens
	// BehavAbsSum is Σ |prox − behav| over every loss token, masked ones included: the
	// train/inference log-prob mismatch (what the sampler computed vs what the trainer recomputes
	// for the same tokens under the same weights, plus staleness).
	BehavAbsSum float64
	AdvSum      float64 // Σ advantage
}

// Add merges o into s.
func (s *Stats) Add(o Stats) {
	s.Tokens += o.Tokens
	s.Loss += o.Loss
	s.ClipCount += o.ClipCount
	s.CapMasked += o.CapMasked
	s.EntropySum += o.EntropySum
	s.ApproxKLSum += o.ApproxKLSum
	s.RatioSum += o.RatioSum
	s.BehavWSum += o.BehavWSum
	s.BehavWMax = max(s.BehavWMax, o.BehavWMax)
	s.BehavKLSum += o.BehavKLSum
	s.BehavAbsSum += o.BehavAbsSum
	s.AdvSum += o.AdvSum
}

func (s *Stats) mean(x float64) float64 {
	if s.Tokens == 0 {
		return 0
	}
	return x / float64(s.Tokens)
}

// ClipFraction is the fraction of loss tokens where clipping was active.
func (s *Stats) ClipFraction() float64 { return s.mean(float64(s.ClipCount)) }

// CapFraction is the fraction of loss tokens masked by the importance-weight cap.
func (s *Stats) CapFraction() float64 { return s.mean(float64(s.CapMasked)) }

// Entropy is the mean entropy over loss tokens.
func (s *Stats) Entropy() float64 { return s.mean(s.EntropySum) }

// ApproxKL is the mean of logp − prox over loss tokens.
func (s *Stats) ApproxKL() float64 { return s.mean(s.ApproxKLSum) }

// Ratio is the mean importance ratio π_θ/π_prox.
func (s *Stats) Ratio() float64 { return s.mean(s.RatioSum) }

// BehavWeight is the mean behaviour importance weight π_prox/π_behav (masked tokens count 0).
func (s *Stats) BehavWeight() float64 { return s.mean(s.BehavWSum) }

// BehavKL is the mean of prox − behav over loss tokens (masked tokens count 0).
func (s *Stats) BehavKL() float64 { return s.mean(s.BehavKLSum) }

// BehavAbsDiff is the mean |prox − behav| over loss tokens (masked ones included): the
// train/inference log-prob mismatch.
func (s *Stats) BehavAbsDiff() float64 { return s.mean(s.BehavAbsSum) }

// Advantage is the mean advantage over loss tokens.
func (s *Stats) Advantage() float64 { return s.mean(s.AdvSum) }

// Compute evaluates the PPO loss of one micro-batch and its gradient per node, whatever
// c.Objective says (the trainers reach it through New, as the "ppo" objective). logp are the current
// log-probs (Backend.Forward), prox the proximal ones (Backend.LogProbs before the update),
// entropy the per-node entropies (for metrics; may be nil). seqs is indexed by the sequence ids of
// mb.RefSeq. n is the number of loss tokens of the whole minibatch (the normaliser). Stats, if
// non-nil, are accumulated.
func (c Config) Compute(mb *prefixtree.MicroBatch, seqs []Seq, logp, prox, entropy []float32, n int64, stats *Stats) (float64, []float32, error) {
	if err := c.validatePPO(); err != nil {
		return 0, nil, err
	}
	nodes := mb.Len()
	if len(logp) != nodes || len(prox) != nodes || (entropy != nil && len(entropy) != nodes) {
		return 0, nil, fmt.Errorf("loss: %d nodes but %d logp, %d prox, %d entropy", nodes, len(logp), len(prox), len(entropy))
	}
	if len(mb.RefStart) != nodes+1 {
		return 0, nil, fmt.Errorf("loss: micro-batch has %d reference starts for %d nodes", len(mb.RefStart), nodes)
	}
	if n <= 0 {
		return 0, nil, fmt.Errorf("loss: normaliser must be > 0, got %d", n)
	}
	lo, hi := c.bounds()
	inv := 1 / float64(n)
	var st Stats
	dlogp := make([]float32, nodes)
	var total float64
	for node := 0; node < nodes; node++ {
		r0, r1 := mb.RefStart[node], mb.RefStart[node+1]
		if r0 == r1 {
			continue
		}
		lp, px := float64(logp[node]), float64(prox[node])
		if math.IsNaN(lp) || math.IsNaN(px) || math.IsInf(px, 0) {
			return 0, nil, fmt.Errorf("loss: node %d: log-prob %v, proximal %v", node, lp, px)
		}
		ratio := math.Exp(lp - px)
		clipped := max(lo, min(hi, ratio))
		var grad float64
		for r := r0; r < r1; r++ {
			s, tok := mb.RefSeq[r], mb.RefTok[r]
			if int(s) >= len(seqs) {
				return 0, nil, fmt.Errorf("loss: node %d refers to sequence %d of %d", node, s, len(seqs))
			}
			sq := &seqs[s]
			i := int(tok - sq.Offset)
			if i < 0 || i >= len(sq.Adv) || i >= len(sq.Behav) {
				return 0, nil, fmt.Errorf("loss: sequence %d token %d outside its data [%d, %d)", s, tok, sq.Offset, int(sq.Offset)+min(len(sq.Adv), len(sq.Behav)))
			}
			adv, behav := float64(sq.Adv[i]), float64(sq.Behav[i])
			if math.IsNaN(adv) || math.IsInf(adv, 0) || math.IsNaN(behav) || math.IsInf(behav, 0) {
				return 0, nil, fmt.Errorf("loss: sequence %d token %d: advantage %v, behaviour log-prob %v", s, tok, adv, behav)
			}
			pg1, pg2 := -adv*ratio, -adv*clipped
			pg := max(pg1, pg2)
			w := math.Exp(px - behav)
			st.BehavWMax = max(st.BehavWMax, w)
			st.BehavAbsSum += math.Abs(px - behav)
			st.Tokens++
			st.RatioSum += ratio
			st.ApproxKLSum += lp - px
			st.AdvSum += adv
			if entropy != nil {
				st.EntropySum += float64(entropy[node])
			}
			if pg1 < pg2 {
				st.ClipCount++
			}
			if c.BehavImpWeightCap > 0 && w > c.BehavImpWeightCap {
				st.CapMasked++
				continue
			}
			st.BehavWSum += w
			st.BehavKLSum += px - behav
			total += pg * w * inv
			if pg1 >= pg2 { // the unclipped branch carries the gradient d(−A·ratio)/dlogp
				grad += pg1 * w * inv
			}
		}
		dlogp[node] = float32(grad)
	}
	st.Loss = total
	if stats != nil {
		stats.Add(st)
	}
	return total, dlogp, nil
}
