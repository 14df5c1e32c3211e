package step

import "maps"

// Episode accounting: where every trajectory the trainer received went. Each step's steps.jsonl
// record carries, for the interval since the previous record,
//
//	episodes_received    trajectories consumed (not counting those skipped as processed
//	                     before a restart)
//	episodes             trajectories the step trained on (record's existing metric)
//	discarded_<reason>   trajectories left out, by reason (AccountingReasons)
//
// and, as a snapshot after the step, episodes_pending: trajectories held in incomplete groups or
// in complete groups waiting for a batch. So over a run, the sum of episodes_received equals the
// sum of episodes plus the sums of every discarded_<reason> plus the last episodes_pending
// (TestEpisodeAccountingAddsUp). Episodes that reached the trainer after its last step are in no
// record: a report counts them, with those never consumed, as in flight at the end.

// Discard reasons of the episode accounting. The first ones are grouping's verdicts
// (group.Verdict's names); the others what happened to a group's trainable members:
// filtered_<reason> by the advantage filter (filtered_equal_rewards: every member had the same
// reward, no GRPO signal), too_few_trainable (a complete group with fewer than min_size trainable
// members), timeout_dropped (an incomplete group that timed out below min_size), pruned (members
// left in a group that stale pruning took below min_size) and no_loss_tokens (a batch without a
// single loss token). Members that went stale while waiting in the ready queue count as stale.
var AccountingReasons = []string{
	"stale", "duplicate", "infra_error", "not_evaluated", "out_of_vocabulary",
	"filtered_equal_rewards", "too_few_trainable", "timeout_dropped", "pruned", "no_loss_tokens",
}

// accounting counts trajectories since the last step record.
type accounting struct {
	received  int
	discarded map[string]int
}

func (a *accounting) discard(reason string, n int) {
	if a.discarded == nil {
		a.discarded = map[string]int{}
	}
	a.discarded[reason] += n
}

// flush adds the counts to m (a step record's metrics), with pending as episodes_pending, and
// starts a new interval. Every reason of AccountingReasons is written, also when 0, so readers
// see the accounting is there.
func (a *accounting) flush(m map[string]float64, pending int) {
	m["episodes_received"] = float64(a.received)
	m["episodes_pending"] = float64(pending)
	for _, r := range AccountingReasons {
		m["discarded_"+r] = 0
	}
	for r, n := range a.discarded {
		m["discarded_"+r] = float64(n)
	}
	a.received = 0
	clear(a.discarded)
}

// pendingEpisodes is the number of trajectories the trainer holds: in incomplete groups and in
// complete groups that wait for a batch.
func (t *Trainer) pendingEpisodes() int {
	n := t.grouper.Pending()
	for _, g := range t.ready {
		n += len(g.Members)
	}
	return n
}

// Accounting returns the counts since the last step record (for tests and the final report of a
// process that stops between steps): episodes_received, discarded_<reason> and episodes_pending.
func (t *Trainer) Accounting() map[string]float64 {
	m := map[string]float64{}
	saved := accounting{received: t.acct.received, discarded: maps.Clone(t.acct.discarded)}
	t.acct.flush(m, t.pendingEpisodes())
	t.acct = saved
	return m
}
