package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"tau2rl/schemas"
	"tau2rl/schemas/steplog"
)

// Accounting is where the GRPO stage's produced episodes went: the trainer's step log
// (episodes_received, episodes, discarded_<reason>, episodes_pending of every step; see
// trainer/step's accounting) against the episodes the archive holds.
type Accounting struct {
	// Produced are the distinct episodes the archive holds, infrastructure errors included.
	Produced int `json:"produced"`
	// Trained are the episodes the steps trained on; TrainedShare is Trained / Produced.
	Trained      int     `json:"trained"`
	TrainedShare float64 `json:"trained_share"`
	// Discarded are the other produced episodes by reason; they add up to Produced − Trained.
	// Reasons are the trainer's (stale, infra_error, not_evaluated, out_of_vocabulary,
	// filtered_equal_rewards, too_few_trainable, timeout_dropped, pruned, no_loss_tokens) and
	// in_flight_at_end: held by the trainer in an incomplete or waiting group at its last step,
	// or not consumed by it before then (the stage ended first). unaccounted, when present, is
	// what the step log and the archive disagree on (a trainer restarted mid-run counts its
	// redelivered episodes twice; an archiver that missed episodes the trainer saw): it should
	// be absent, and the report says so when it is not.
	Discarded map[string]int `json:"discarded"`
	// DuplicateCopies are copies of episodes the trainer had already received (redelivery): not
	// produced episodes, so not in Discarded.
	DuplicateCopies int `json:"duplicate_copies"`
}

// InFlightAtEnd and Unaccounted are Accounting.Discarded's reasons that the report adds to the
// trainer's.
const (
	InFlightAtEnd = "in_flight_at_end"
	Unaccounted   = "unaccounted"
)

// Account sums the step log's accounting against produced distinct episodes. Step records
// without accounting (written before the trainer had it) leave it empty but for Produced and
// Trained, with every untrained episode unaccounted.
func Account(recs []steplog.Record, produced int) Accounting {
	a := Accounting{Produced: produced, Discarded: map[string]int{}}
	var received, pending int
	for _, r := range recs {
		a.Trained += int(r.Metrics["episodes"])
		received += int(r.Metrics["episodes_received"])
		if p, ok := r.Metrics["episodes_pending"]; ok {
			pending = int(p)
		}
		for k, v := range r.Metrics {
			if reason, ok := strings.CutPrefix(k, "discarded_"); ok && v != 0 {
				if reason == "duplicate" {
					a.DuplicateCopies += int(v)
				} else {
					a.Discarded[reason] += int(v)
				}
			}
		}
	}
	// Distinct episodes the trainer consumed; those it had not by its last step were in flight.
	notConsumed := produced - (received - a.DuplicateCopies)
	if inFlight := pending + max(notConsumed, 0); inFlight > 0 {
		a.Discarded[InFlightAtEnd] = inFlight
	}
	sum := 0
	for _, n := range a.Discarded {
		sum += n
	}
	if d := produced - a.Trained - sum; d != 0 {
		a.Discarded[Unaccounted] = d
	}
	if produced > 0 {
		a.TrainedShare = float64(a.Trained) / float64(produced)
	}
	return a
}

// Reasons returns a's reasons, the most episodes first (ties by name).
func (a Accounting) Reasons() []string {
	out := make([]string, 0, len(a.Discarded))
	for r := range a.Discarded {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if a.Discarded[out[i]] != a.Discarded[out[j]] {
			return a.Discarded[out[i]] > a.Discarded[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// Cell is the GRPO episodes of one task (or of every task: Task "all") started under one policy
// version (or under any: Version −1), reconstructed from the archive.
type Cell struct {
	Task    string `json:"task"`
	Version int64  `json:"version"`
	// Episodes with a reward; Successes those with reward 1 (τ²'s success).
	Episodes  int     `json:"episodes"`
	Successes int     `json:"successes"`
	Success   float64 `json:"success_rate"`
	// Groups are the episodes' GRPO groups (the episodes of one rollout request); EqualGroups
	// those whose rewards are all equal, which carry no GRPO signal and which the trainer drops
	// by default (actor.advantage.drop_equal_rewards). The trainer's own count of the groups it
	// dropped is Accounting.Discarded["filtered_equal_rewards"] (in episodes).
	Groups      int `json:"groups"`
	EqualGroups int `json:"equal_reward_groups"`
	// AdvAbsMean and AdvStd are the mean |advantage| and its standard deviation over the
	// episodes, the advantage being reward − the group's mean reward (before any normalisation):
	// how much signal the task gives. 0 when every group is of equal rewards.
	AdvAbsMean float64 `json:"advantage_abs_mean"`
	AdvStd     float64 `json:"advantage_std"`
	// GenTokens is the mean number of generated (completion) tokens per episode.
	GenTokens float64 `json:"generated_tokens_mean"`
	// Failures count the failed episodes (reward < 1) by what τ²'s reward breakdown says went
	// wrong: db (the final database differs), action (an expected action missing), communicate
	// (information not given to the user), malformed (a turn whose tool call did not parse),
	// other (none of those: e.g. the conversation hit its step limit with no graded part
	// failing). One episode can count in several.
	Failures map[string]int `json:"failures,omitempty"`
}

// Diagnosis is the per task and per policy version view of the GRPO stage.
type Diagnosis struct {
	// Cells are task × version, sorted by task then version.
	Cells []Cell `json:"cells"`
	// Tasks are each task over every version (Version −1); Total every task and version.
	Tasks []Cell `json:"tasks"`
	Total Cell   `json:"total"`
}

// AllTasks and AllVersions mark a Cell that sums tasks or versions.
const (
	AllTasks    = "all"
	AllVersions = -1
)

// Failure kinds of Cell.Failures.
const (
	FailDB          = "db"
	FailAction      = "action"
	FailCommunicate = "communicate"
	FailMalformed   = "malformed"
	FailOther       = "other"
)

// failures names what went wrong in a failed episode.
func failures(t *schemas.Trajectory) []string {
	var out []string
	b := t.Breakdown
	for _, c := range []struct {
		v    *float64
		name string
	}{{b.DB, FailDB}, {b.Action, FailAction}, {b.Communicate, FailCommunicate}} {
		if c.v != nil && *c.v < 1 {
			out = append(out, c.name)
		}
	}
	malformed := t.InvalidFormatTurns > 0
	for i := range t.Calls {
		malformed = malformed || t.Calls[i].InvalidFormat
	}
	if malformed {
		out = append(out, FailMalformed)
	}
	if len(out) == 0 {
		out = append(out, FailOther)
	}
	return out
}

// success is τ²'s: a reward of 1 (rewards are products of 0/1 parts, so 1 within rounding).
func success(r float64) bool { return r >= 1-1e-9 }

// Diagnose builds the diagnosis from the GRPO stage's trajectories (each id once; those without
// status ok are skipped: they carry no reward). Groups are the episodes of one rollout request
// (RequestID; episodes without one are grouped by task and policy version); a group counts in
// the cell of its first episode's version.
func Diagnose(trajs []*schemas.Trajectory) Diagnosis {
	type acc struct {
		Cell
		adv []float64
	}
	cells := map[string]*acc{}
	get := func(task string, v int64) *acc {
		k := fmt.Sprintf("%s\x00%d", task, v)
		c, ok := cells[k]
		if !ok {
			c = &acc{Cell: Cell{Task: task, Version: v, Failures: map[string]int{}}}
			cells[k] = c
		}
		return c
	}
	groups := map[string][]*schemas.Trajectory{}
	var order []string
	for _, t := range trajs {
		if t.Status != schemas.StatusOK {
			continue
		}
		task := t.Domain + "/" + t.TaskID
		key := "req:" + t.RequestID
		if t.RequestID == "" {
			key = fmt.Sprintf("task:%s@%d", task, t.PolicyVersionStart)
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], t)
	}
	for _, key := range order {
		g := groups[key]
		var mean float64
		for _, t := range g {
			mean += t.Reward
		}
		mean /= float64(len(g))
		equal := true
		for _, t := range g {
			equal = equal && t.Reward == g[0].Reward
		}
		first := g[0]
		task := first.Domain + "/" + first.TaskID
		for _, c := range []*acc{get(task, first.PolicyVersionStart), get(task, AllVersions), get(AllTasks, first.PolicyVersionStart), get(AllTasks, AllVersions)} {
			c.Groups++
			if equal {
				c.EqualGroups++
			}
		}
		for _, t := range g {
			for _, c := range []*acc{get(task, t.PolicyVersionStart), get(task, AllVersions), get(AllTasks, t.PolicyVersionStart), get(AllTasks, AllVersions)} {
				c.Episodes++
				c.GenTokens += float64(t.GeneratedTokens())
				c.adv = append(c.adv, t.Reward-mean)
				if success(t.Reward) {
					c.Successes++
				} else {
					for _, f := range failures(t) {
						c.Failures[f]++
					}
				}
			}
		}
	}
	var d Diagnosis
	for _, c := range cells {
		out := c.Cell
		if out.Episodes > 0 {
			n := float64(out.Episodes)
			out.Success = float64(out.Successes) / n
			out.GenTokens /= n
			var abs, s, ss float64
			for _, a := range c.adv {
				abs += math.Abs(a)
				s += a
			}
			m := s / n
			for _, a := range c.adv {
				ss += (a - m) * (a - m)
			}
			out.AdvAbsMean, out.AdvStd = abs/n, math.Sqrt(ss/n)
		}
		switch {
		case out.Task == AllTasks && out.Version == AllVersions:
			d.Total = out
		case out.Version == AllVersions:
			d.Tasks = append(d.Tasks, out)
		case out.Task != AllTasks:
			d.Cells = append(d.Cells, out)
		}
	}
	less := func(s []Cell) func(i, j int) bool {
		return func(i, j int) bool {
			if s[i].Task != s[j].Task {
				return s[i].Task < s[j].Task
			}
			return s[i].Version < s[j].Version
		}
	}
	sort.Slice(d.Cells, less(d.Cells))
	sort.Slice(d.Tasks, less(d.Tasks))
	return d
}
