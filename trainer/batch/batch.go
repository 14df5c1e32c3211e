// Package batch turns the groups of one training step into what the packer and the loss consume:
// one token sequence per policy LLM call (or per token-exact conversation), its loss mask, and
// per loss token the advantage and the behaviour log-prob.
package batch

import (
	"fmt"
	"math"

	"tau2rl/schemas"
	"tau2rl/trainer/advantage"
	"tau2rl/trainer/group"
	"tau2rl/trainer/loss"
	"tau2rl/trainer/prefixtree"
)

// Sequence modes for Config.SequenceMode.
const (
	// ModeCall makes one sequence per policy LLM call, full prompt ‖ completion (AReaL's
	// "individual" export). Works with any chat template.
	ModeCall = "call"
	// ModeConversation merges consecutive calls of an episode into one sequence whenever a call's
	// prompt extends the previous call's prompt ‖ completion token for token (AReaL's "concat"
	// export). With prefix trees the packed tokens are the same as ModeCall; there are fewer
	// sequences to index.
	ModeConversation = "conversation"
)

// Reward sources for Config.RewardSource.
const (
	// RewardTau2 trains on τ²'s reward for every call of the episode (AReaL HEAD with
	// turn_discount 1 and no format penalty, which is what its τ² example effectively does).
	RewardTau2 = "reward"
	// RewardShaped trains on the producer's shaping: each call's ShapedReward, with the episode's
	// ShapedReward as the group baseline.
	RewardShaped = "shaped"
)

// Config selects how trajectories become sequences.
type Config struct {
	// SequenceMode is "call" (default) or "conversation".
	SequenceMode string `yaml:"sequence_mode"`
	// RewardSource is "reward" (default: τ²'s reward) or "shaped" (the producer's per-call
	// shaped rewards, e.g. turn_discount).
	RewardSource string `yaml:"reward_source"`
}

// DefaultConfig returns per-call sequences trained on τ²'s reward.
func DefaultConfig() Config { return Config{SequenceMode: ModeCall, RewardSource: RewardTau2} }

// Validate rejects unknown modes.
func (c Config) Validate() error {
	if c.SequenceMode != ModeCall && c.SequenceMode != ModeConversation {
		return fmt.Errorf("batch: sequence_mode %q: want %q or %q", c.SequenceMode, ModeCall, ModeConversation)
	}
	if c.RewardSource != RewardTau2 && c.RewardSource != RewardShaped {
		return fmt.Errorf("batch: reward_source %q: want %q or %q", c.RewardSource, RewardTau2, RewardShaped)
	}
	return nil
}

// SeqInfo says where a sequence came from.
type SeqInfo struct {
	Group, Member int // indices into Batch.Groups and the group's Members
	FirstCall     int // first (and, in call mode, only) call of the sequence
	Calls         int // calls merged into the sequence
}

// Batch is one training step's input.
type Batch struct {
	Groups []*group.Group
	Seqs   []prefixtree.Sequence
	Loss   []loss.Seq // indexed like Seqs
	Info   []SeqInfo  // indexed like Seqs
	// Advantages[g][m][c] is the advantage of call c of member m of group g.
	Advantages [][][]float64
	// Oversize counts calls dropped because their sequence exceeds the token limit.
	Oversize int
	// InvalidLogprobs counts calls dropped because a trained token's behaviour log-prob is not a
	// finite number ≤ 0 (a producer bug must not poison the step or crash the trainer).
	InvalidLogprobs int
	// MaxStaleness is the largest (version − token version) over the loss tokens that carry a
	// version no newer than the trainer's, and StalenessSum their sum; StalenessTokens counts
	// them (the mean's denominator).
	MaxStaleness    int64
	StalenessSum    int64
	StalenessTokens int64
	// AheadTokens counts loss tokens whose version is newer than the trainer's, and MaxAhead is
	// the largest such lead (token version − version). A token cannot be sampled by weights the
	// trainer has not made yet: such a version is a server that reports another numbering (one
	// started from a checkpoint that was not reloaded with the trainer's version, another run's
	// server). These tokens are left out of the staleness sum instead of averaging a negative
	// lag into it, and the trainer reports them (steps.jsonl tokens_ahead_of_trainer).
	AheadTokens int64
	MaxAhead    int64
	LossTokens  int64
}

// StalenessMean is the mean version lag of the loss tokens whose lag is known and not negative
// (0 when there are none).
func (b *Batch) StalenessMean() float64 {
	if b.StalenessTokens == 0 {
		return 0
	}
	return float64(b.StalenessSum) / float64(b.StalenessTokens)
}

// EpisodeReward is the reward of t that the advantage estimator sees under source.
func EpisodeReward(t *schemas.Trajectory, source string) float64 {
	if source == RewardShaped {
		return t.ShapedReward
	}
	return t.Reward
}

// AdvantageInput converts a group for the estimator: the episode reward per Config.RewardSource,
// and per call its loss-token count and (shaped source) its shaped reward.
func (c Config) AdvantageInput(g *group.Group) advantage.Group {
	out := advantage.Group{Episodes: make([]advantage.Episode, len(g.Members))}
	for i, m := range g.Members {
		t := m.Traj
		ep := advantage.Episode{Reward: EpisodeReward(t, c.RewardSource), Calls: make([]advantage.Call, len(t.Calls))}
		for k := range t.Calls {
			call := &t.Calls[k]
			n := 0
			for j := range call.CompletionTokens {
				if call.Trained(j) {
					n++
				}
			}
			ep.Calls[k].LossTokens = n
			if c.RewardSource == RewardShaped {
				r := call.ShapedReward
				ep.Calls[k].Shaped = &r
			}
		}
		out.Episodes[i] = ep
	}
	return out
}

// Build computes advantages for groups and lays out their sequences. version is the trainer's
// current policy version (for staleness statistics). A call whose prompt ‖ completion is longer
// than maxTokens (the micro-batch budget; ≤ 0 means no limit) cannot be packed: it is left out
// and counted in Oversize (as AReaL's pipeline drops samples over max_context_length) instead of
// failing the step, and conversation mode never merges a run beyond maxTokens.
func Build(groups []*group.Group, adv advantage.Config, cfg Config, version int64, maxTokens int) (*Batch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	in := make([]advantage.Group, len(groups))
	for i, g := range groups {
		in[i] = cfg.AdvantageInput(g)
	}
	advs, err := adv.Compute(in)
	if err != nil {
		return nil, fmt.Errorf("batch: %w", err)
	}
	b := &Batch{Groups: groups, Advantages: advs}
	for gi, g := range groups {
		for mi, m := range g.Members {
			if err := b.addTrajectory(m.Traj, advs[gi][mi], gi, mi, cfg.SequenceMode, version, maxTokens); err != nil {
				return nil, fmt.Errorf("batch: group %s trajectory %s: %w", g.Key, m.Traj.ID, err)
			}
		}
	}
	return b, nil
}

// chains splits the calls of t into runs that form one sequence each: every call alone in call
// mode; in conversation mode a call joins the previous run when its prompt is exactly the previous
// call's prompt ‖ completion followed by new tokens, and the merged sequence fits maxTokens.
func chains(t *schemas.Trajectory, prompts [][]int32, mode string, maxTokens int) [][2]int {
	var out [][2]int
	for i := range t.Calls {
		c := &t.Calls[i]
		fits := maxTokens <= 0 || len(prompts[i])+len(c.CompletionTokens) <= maxTokens
		if mode == ModeConversation && i > 0 && fits && c.PromptRef == i-1 &&
			c.PromptShared == len(prompts[i-1])+len(t.Calls[i-1].CompletionTokens) {
			out[len(out)-1][1] = i + 1
			continue
		}
		out = append(out, [2]int{i, i + 1})
	}
	return out
}

func (b *Batch) addTrajectory(t *schemas.Trajectory, advs []float64, gi, mi int, mode string, version int64, maxTokens int) error {
	prompts, err := t.FullPrompts()
	if err != nil {
		return err
	}
	for _, ch := range chains(t, prompts, mode, maxTokens) {
		last := ch[1] - 1
		lc := &t.Calls[last]
		if maxTokens > 0 && len(prompts[last])+len(lc.CompletionTokens) > maxTokens {
			b.Oversize++ // a run that does not fit is a single call (chains never merges past the limit)
			continue
		}
		if bad := invalidLogprobs(t, ch); bad > 0 {
			b.InvalidLogprobs += bad
			continue
		}
		tokens := make([]int32, 0, len(prompts[last])+len(lc.CompletionTokens))
		tokens = append(append(tokens, prompts[last]...), lc.CompletionTokens...)
		first := len(prompts[ch[0]]) // first completion token of the run
		ls := loss.Seq{Offset: int32(first), Adv: make([]float32, len(tokens)-first), Behav: make([]float32, len(tokens)-first)}
		mask := make([]bool, len(tokens))
		trained := 0
		for k := ch[0]; k <= last; k++ {
			c := &t.Calls[k]
			start := len(prompts[k])
			versions := c.Versions()
			for j := range c.CompletionTokens {
				pos := start + j
				if !c.Trained(j) || pos == 0 {
					continue // pos 0 has no context to be scored from
				}
				mask[pos] = true
				ls.Adv[pos-first] = float32(advs[k])
				ls.Behav[pos-first] = c.BehaviorLogprobs[j]
				trained++
				if j < len(versions) {
					st := version - versions[j]
					if st < 0 {
						b.AheadTokens++
						b.MaxAhead = max(b.MaxAhead, -st)
						continue
					}
					b.StalenessSum += st
					b.StalenessTokens++
					b.MaxStaleness = max(b.MaxStaleness, st)
				}
			}
		}
		if trained == 0 {
			continue // nothing to learn from: no compute spent on it
		}
		b.LossTokens += int64(trained)
		b.Seqs = append(b.Seqs, prefixtree.Sequence{Tokens: tokens, Loss: mask})
		b.Loss = append(b.Loss, ls)
		b.Info = append(b.Info, SeqInfo{Group: gi, Member: mi, FirstCall: ch[0], Calls: ch[1] - ch[0]})
	}
	return nil
}

// maxLogprob tolerates sampler rounding just above 0.
const maxLogprob = 1e-3

// invalidLogprobs counts the calls of run ch with a trained token whose behaviour log-prob is NaN,
// infinite or positive.
func invalidLogprobs(t *schemas.Trajectory, ch [2]int) int {
	bad := 0
	for k := ch[0]; k < ch[1]; k++ {
		c := &t.Calls[k]
		for j, lp := range c.BehaviorLogprobs {
			if c.Trained(j) && (math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0) || lp > maxLogprob) {
				bad++
				break
			}
		}
	}
	return bad
}
