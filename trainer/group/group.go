// Package group collects scored trajectories into GRPO groups: the n episodes of one task that
// are compared with each other.
//
// Rules (issue 5, AReaL's τ² example):
//   - The group key is domain + task id (τ² task ids repeat across domains). A group completes
//     when it holds Size members; members beyond Size start the next group of the same task (two
//     requests for one task may be in flight).
//   - Redelivered duplicates are ignored by trajectory id (at-least-once delivery). The id set is
//     bounded: it remembers the last DedupeCapacity ids (lib/seen: by count, first in first out;
//     a redelivery follows its original within one consumer session, far fewer ids later).
//   - Episodes that cannot be trained on (status infra_error or not_evaluated) never become
//     members, but they count toward their group's Size: a producer runs a request's episodes
//     once and publishes them together, so they will not be replaced, and waiting for Size
//     trainable members held such a group until Timeout (with retail's ungraded NL-assertion
//     tasks, most groups). A group completed this way is Partial; the caller trains it only
//     with at least MinSize members.
//   - Samples whose oldest token is more than max_head_offpolicyness versions behind the trainer
//     are dropped and counted (Stale).
//   - A group still incomplete Timeout after its first member arrived is either dropped or used
//     as it is (OnTimeout), the latter only with at least MinSize members.
package group

import (
	"fmt"
	"time"

	"tau2rl/lib/seen"
	"tau2rl/schemas"
)

// Timeout rules for Config.OnTimeout.
const (
	// OnTimeoutDrop discards an incomplete group when it times out.
	OnTimeoutDrop = "drop"
	// OnTimeoutPartial uses what arrived, if at least MinSize members.
	OnTimeoutPartial = "partial"
)

// Config configures grouping.
type Config struct {
	// Size is the group size n (AReaL gconfig.n_samples). Default 8.
	Size int `yaml:"group_size"`
	// Timeout is how long a group may stay incomplete after its first member. Default 15m
	// (AReaL's per-episode timeout is 600 s; members run concurrently).
	Timeout time.Duration `yaml:"timeout"`
	// OnTimeout is "partial" (default: train on what arrived) or "drop".
	OnTimeout string `yaml:"on_timeout"`
	// MinSize is the fewest members a timed-out group may be trained with. Default 2 (a group
	// baseline needs two episodes).
	MinSize int `yaml:"min_size"`
	// DedupeCapacity is how many trajectory ids are remembered for de-duplication: the last
	// DedupeCapacity ids added (lib/seen's rule). Default 1<<20.
	DedupeCapacity int `yaml:"dedupe_capacity"`
	// VocabSize is the trained model's vocabulary size (set by the trainer from its backend, not
	// by configuration): a trajectory holding a token id outside [0, VocabSize) is excluded like
	// an infrastructure error, because the step would reject its whole batch and the trainer would
	// fail on it again after every restart (its offset never committed). 0 disables the check.
	VocabSize int `yaml:"-"`
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Size: 8, Timeout: 15 * time.Minute, OnTimeout: OnTimeoutPartial, MinSize: 2, DedupeCapacity: 1 << 20}
}

// Validate reports an unusable configuration.
func (c Config) Validate() error {
	switch {
	case c.Size < 1:
		return fmt.Errorf("group: group_size must be ≥ 1, got %d", c.Size)
	case c.Timeout <= 0:
		return fmt.Errorf("group: timeout must be > 0, got %s", c.Timeout)
	case c.OnTimeout != OnTimeoutDrop && c.OnTimeout != OnTimeoutPartial:
		return fmt.Errorf("group: on_timeout %q: want %q or %q", c.OnTimeout, OnTimeoutDrop, OnTimeoutPartial)
	case c.MinSize < 1 || c.MinSize > c.Size:
		return fmt.Errorf("group: min_size must be in [1, group_size=%d], got %d", c.Size, c.MinSize)
	case c.DedupeCapacity < 1:
		return fmt.Errorf("group: dedupe_capacity must be ≥ 1, got %d", c.DedupeCapacity)
	case c.VocabSize < 0:
		return fmt.Errorf("group: vocabulary size must be ≥ 0, got %d", c.VocabSize)
	}
	return nil
}

// Member is one trajectory with the opaque handle of the message it came in (the step loop uses
// it to track offsets).
type Member struct {
	Traj   *schemas.Trajectory
	Handle uint64
}

// Group is a set of episodes of one task.
type Group struct {
	Key     string // domain/task id
	Domain  string
	TaskID  string
	Members []Member
	// First is when the first member arrived.
	First time.Time
	// Excluded counts the group's episodes that arrived but cannot be trained on (status
	// infra_error or not_evaluated, or a token outside the model's vocabulary).
	Excluded int
	// Partial is set when the group was released with fewer than Size members: by timeout, or
	// complete with Excluded episodes.
	Partial bool
}

// Key returns the group key of a trajectory.
func Key(t *schemas.Trajectory) string { return t.Domain + "/" + t.TaskID }

// Verdict is what Add did with a trajectory.
type Verdict int

// Verdicts of Add.
const (
	Accepted        Verdict = iota // joined a group
	Duplicate                      // id already seen
	InfraError                     // status infra_error: never trained; counts toward its group's size
	NotEvaluated                   // status not_evaluated (no reward): the same
	Stale                          // older than max_head_offpolicyness allows
	OutOfVocabulary                // a token id the model cannot embed: never trained; counts toward its group's size
)

// String names the verdict for logs and metric labels.
func (v Verdict) String() string {
	switch v {
	case Accepted:
		return "accepted"
	case Duplicate:
		return "duplicate"
	case InfraError:
		return "infra_error"
	case NotEvaluated:
		return "not_evaluated"
	case Stale:
		return "stale"
	case OutOfVocabulary:
		return "out_of_vocabulary"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// IsStale reports whether t is more than maxOff versions behind version, by the pipeline's one
// rule (schemas.TooStale). The age of a trajectory is that of its oldest token (MinVersion), so a
// trajectory started under an old policy is judged by the tokens that policy produced.
func IsStale(t *schemas.Trajectory, version, maxOff int64) bool {
	return schemas.TooStale(t.MinVersion(), version, maxOff)
}

// Grouper accumulates members into groups. It is not safe for concurrent use.
type Grouper struct {
	cfg     Config
	open    map[string]*Group
	order   []string          // keys of open groups in order of first arrival (for Expire)
	ids     *seen.Set[string] // trajectory ids added or remembered
	pending int
}

// New returns an empty Grouper.
func New(cfg Config) (*Grouper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Grouper{cfg: cfg, open: map[string]*Group{}, ids: seen.New[string](cfg.DedupeCapacity)}, nil
}

// VocabSize is the vocabulary size trajectories are checked against (0: unchecked).
func (g *Grouper) VocabSize() int { return g.cfg.VocabSize }

// Remember marks ids as already seen (e.g. trained before a restart), so redeliveries are
// reported as Duplicate.
func (g *Grouper) Remember(ids ...string) {
	for _, id := range ids {
		g.ids.Add(id)
	}
}

// Add offers m. It returns the completed group when m completes one, and the verdict for m.
// version is the trainer's current policy version and maxOff max_head_offpolicyness (< 0
// disables the staleness check). A group completed by an excluded episode may hold fewer than
// MinSize members, even none: the caller drops it then.
func (g *Grouper) Add(m Member, now time.Time, version, maxOff int64) (*Group, Verdict) {
	t := m.Traj
	if !g.ids.Add(t.ID) {
		return nil, Duplicate
	}
	if t.Status != schemas.StatusOK {
		grp := g.openGroup(t, now)
		grp.Excluded++
		v := InfraError
		if t.Status == schemas.StatusNotEvaluated {
			v = NotEvaluated
		}
		return g.completeIfFull(grp), v
	}
	if _, bad := OutsideVocabulary(t, g.cfg.VocabSize); bad {
		grp := g.openGroup(t, now)
		grp.Excluded++
		return g.completeIfFull(grp), OutOfVocabulary
	}
	if maxOff >= 0 && IsStale(t, version, maxOff) {
		return nil, Stale
	}
	grp := g.openGroup(t, now)
	grp.Members = append(grp.Members, m)
	g.pending++
	return g.completeIfFull(grp), Accepted
}

// OutsideVocabulary returns the first token id of t (prompt or completion, any call) outside
// [0, vocab), if there is one; vocab ≤ 0 checks nothing.
func OutsideVocabulary(t *schemas.Trajectory, vocab int) (int32, bool) {
	if vocab <= 0 {
		return 0, false
	}
	for _, c := range t.Calls {
		for _, toks := range [2][]int32{c.PromptTokens, c.CompletionTokens} {
			for _, id := range toks {
				if id < 0 || int(id) >= vocab {
					return id, true
				}
			}
		}
	}
	return 0, false
}

// openGroup returns the open group of t's key, starting one at now if there is none.
func (g *Grouper) openGroup(t *schemas.Trajectory, now time.Time) *Group {
	key := Key(t)
	grp := g.open[key]
	if grp == nil {
		grp = &Group{Key: key, Domain: t.Domain, TaskID: t.TaskID, First: now}
		g.open[key] = grp
		g.order = append(g.order, key)
	}
	return grp
}

// completeIfFull closes grp and returns it once its members and excluded episodes reach Size.
func (g *Grouper) completeIfFull(grp *Group) *Group {
	if len(grp.Members)+grp.Excluded < g.cfg.Size {
		return nil
	}
	g.close(grp.Key)
	grp.Partial = len(grp.Members) < g.cfg.Size
	return grp
}

func (g *Grouper) close(key string) {
	g.pending -= len(g.open[key].Members)
	delete(g.open, key)
	for i, k := range g.order {
		if k == key {
			g.order = append(g.order[:i], g.order[i+1:]...)
			break
		}
	}
}

// Expire releases groups that have been incomplete for longer than the timeout: ready groups
// (OnTimeout partial with ≥ MinSize members, marked Partial) and dropped ones.
func (g *Grouper) Expire(now time.Time) (ready, dropped []*Group) {
	for len(g.order) > 0 {
		key := g.order[0]
		grp := g.open[key]
		if now.Sub(grp.First) < g.cfg.Timeout {
			break
		}
		g.close(key)
		if g.cfg.OnTimeout == OnTimeoutPartial && len(grp.Members) >= g.cfg.MinSize {
			grp.Partial = true
			ready = append(ready, grp)
		} else {
			dropped = append(dropped, grp)
		}
	}
	return ready, dropped
}

// Prune removes members that became stale while their group waited for a batch, returning them.
// The caller decides whether the group is still large enough (MinSize).
func Prune(grp *Group, version, maxOff int64) (stale []Member) {
	if maxOff < 0 {
		return nil
	}
	kept := grp.Members[:0]
	for _, m := range grp.Members {
		if IsStale(m.Traj, version, maxOff) {
			stale = append(stale, m)
		} else {
			kept = append(kept, m)
		}
	}
	grp.Members = kept
	return stale
}

// MinSize is the configured minimum size of a trainable group.
func (g *Grouper) MinSize() int { return g.cfg.MinSize }

// Pending returns the number of members in incomplete groups.
func (g *Grouper) Pending() int { return g.pending }

// OpenGroups returns the number of incomplete groups.
func (g *Grouper) OpenGroups() int { return len(g.open) }

// PendingMembers lists the members of incomplete groups (for checkpoint state).
func (g *Grouper) PendingMembers() []Member {
	var out []Member
	for _, k := range g.order {
		out = append(out, g.open[k].Members...)
	}
	return out
}
