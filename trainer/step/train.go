package step

import (
	"context"
	"fmt"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/dp"
	"tau2rl/schemas"
	"tau2rl/schemas/steplog"
	"tau2rl/trainer/batch"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/group"
	"tau2rl/trainer/loss"
	"tau2rl/trainer/offsets"
	"tau2rl/trainer/prefixtree"
)

// takeBatch pops B groups from the ready queue, dropping members that went stale while they
// waited (and groups that fall below the minimum size because of it).
func (t *Trainer) takeBatch() ([]*group.Group, error) {
	var out []*group.Group
	for len(out) < t.cfg.BatchSize && len(t.ready) > 0 {
		g := t.ready[0]
		t.ready = t.ready[1:]
		for _, m := range group.Prune(g, t.version, t.cfg.MaxHeadOffpolicyness) {
			t.d.Metrics.StaleDropped.Inc()
			t.acct.discard("stale", 1)
			if err := t.discard(m); err != nil {
				return nil, err
			}
		}
		if len(g.Members) < t.grouper.MinSize() {
			if err := t.discardGroup(g, "pruned"); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, g)
	}
	return out, nil
}

// trainStep runs one policy update over B groups (fewer only when pruning emptied the queue).
func (t *Trainer) trainStep(ctx context.Context) error {
	start := time.Now()
	groups, err := t.takeBatch()
	if err != nil || len(groups) == 0 {
		return err
	}
	t.lastProgress = t.d.Now()
	clear(t.dropped)
	phase := t.phase

	t0 := time.Now()
	b, err := batch.Build(groups, t.cfg.Actor.Advantage, t.cfg.Sequences, t.version, t.cfg.Actor.MBSpec.MaxTokensPerMB)
	if err != nil {
		return fmt.Errorf("step %d: %w", t.step+1, err)
	}
	if b.InvalidLogprobs > 0 {
		t.d.Metrics.InvalidCalls.Add(float64(b.InvalidLogprobs))
		t.d.Log.Warn("calls with invalid behaviour log-probs left out", "calls", b.InvalidLogprobs)
	}
	if b.Oversize > 0 {
		t.d.Metrics.OversizeCalls.Add(float64(b.Oversize))
		t.d.Log.Warn("calls longer than max_tokens_per_mb left out", "calls", b.Oversize, "max_tokens_per_mb", t.cfg.Actor.MBSpec.MaxTokensPerMB)
	}
	phase("build", t0)
	t0 = time.Now()
	p, err := prefixtree.Pack(b.Seqs, t.cfg.Actor.MBSpec)
	if err != nil {
		return fmt.Errorf("step %d: %w", t.step+1, err)
	}
	phase("pack", t0)
	if p.LossTokens == 0 {
		// Nothing to learn from (every completion token masked): no update, no new version.
		t.d.Log.Warn("step skipped: no loss tokens", "groups", len(groups))
		for _, g := range groups {
			if err := t.discardGroup(g, "no_loss_tokens"); err != nil {
				return err
			}
		}
		return nil
	}

	lr := t.optimizer().LR
	stats, gradNorm, err := t.update(p, b.Loss)
	if err != nil {
		return fmt.Errorf("step %d: %w", t.step+1, err)
	}
	t.step++
	t.version++
	t.publishProgress()

	for _, g := range groups {
		t.d.Metrics.Groups.WithLabelValues("trained").Inc()
		for _, m := range g.Members {
			if err := t.tracker.Trained(offsets.Handle(m.Handle), t.step, m.Traj.ID); err != nil {
				return fmt.Errorf("step %d: trajectory %s: %w", t.step, m.Traj.ID, err)
			}
			if t.d.Admission != nil {
				t.d.Admission.Finished(m.Traj.RequestID, m.Traj.ID)
			}
		}
	}
	elapsed := time.Since(start)
	t.record(groups, b, p, stats, gradNorm, elapsed)
	t.last["lr"] = lr
	if err := steplog.Append(t.cfg.Checkpoint.Dir, steplog.Record{Kind: "grpo", Step: t.step, Version: t.version, Time: t.d.Now().UTC(), Metrics: t.last}); err != nil {
		return fmt.Errorf("step %d: %w", t.step, err)
	}
	t.d.Log.Info("step", "step", t.step, "version", t.version, "groups", len(groups), "sequences", len(b.Seqs),
		"microbatches", len(p.MicroBatches), "tree_token_ratio", p.TokenRatio(), "lr", lr, "loss", stats.Loss,
		"grad_norm", gradNorm, "entropy", stats.Entropy(), "clip_fraction", stats.ClipFraction(),
		"behav_abs_diff", stats.BehavAbsDiff(), "behav_cap_fraction", stats.CapFraction(), "seconds", elapsed.Seconds())
	if t.step%int64(t.cfg.Checkpoint.Every) == 0 {
		return t.checkpoint(ctx)
	}
	if r, ok := t.d.Reloader.(MemoryReloader); ok && r.ReloadsFromMemory() {
		t.announce(ctx, "") // no checkpoint this step: the servers take the weights from memory
	}
	return nil
}

// optimizer is the AdamW settings of the step being taken (index t.step): actor.optimizer with
// its learning-rate schedule applied over max_steps (gpu.Optimizer.At). A restored trainer
// continues the schedule at the checkpoint's step. A follower host's trainer holds the leader's
// already scheduled settings (a constant schedule), which this returns unchanged.
func (t *Trainer) optimizer() gpu.Optimizer {
	return t.cfg.Actor.Optimizer.At(t.step, t.cfg.MaxSteps)
}

// update computes proximal log-probs, then for each minibatch runs forward, loss and backward
// over its micro-batches and one optimizer step.
func (t *Trainer) update(p *prefixtree.Packing, seqs []loss.Seq) (loss.Stats, float64, error) {
	be := t.d.Backend
	if g, ok := be.(*dp.Group); ok {
		if t.d.Feed != nil {
			return t.updateHosts(g, p, seqs)
		}
		return t.updateParallel(g, p, seqs)
	}
	obj, err := loss.New(t.cfg.Actor.Config)
	if err != nil {
		return loss.Stats{}, 0, err
	}
	mbs := p.MicroBatches
	var prox [][]float32
	if t.cfg.Actor.RecomputeLogprob {
		t0 := time.Now()
		prox = make([][]float32, len(mbs))
		for i, mb := range mbs {
			lp, _, err := be.LogProbs(&mb.MicroBatch)
			if err != nil {
				return loss.Stats{}, 0, fmt.Errorf("proximal log-probs of micro-batch %d: %w", i, err)
			}
			prox[i] = lp
		}
		t.phase("prox", t0)
	}
	t0 := time.Now()
	var stats loss.Stats
	var gradNorm float64
	n := t.cfg.Actor.PPONMinibatches
	for k := 0; k < n; k++ {
		lo, hi := k*len(mbs)/n, (k+1)*len(mbs)/n
		var tokens int64
		for _, mb := range mbs[lo:hi] {
			tokens += int64(len(mb.RefSeq))
		}
		if tokens == 0 {
			continue
		}
		for i := lo; i < hi; i++ {
			mb := mbs[i]
			logp, ent, err := be.Forward(&mb.MicroBatch)
			if err != nil {
				return stats, 0, fmt.Errorf("forward of micro-batch %d: %w", i, err)
			}
			px := logp // recompute_logprob off: the proximal policy is the current one (detached)
			if prox != nil {
				px = prox[i]
			}
			res, err := loss.Evaluate(obj, loss.Input{MB: mb, Seqs: seqs, Logp: logp, Prox: px, Entropy: ent, N: tokens})
			if err != nil {
				return stats, 0, fmt.Errorf("loss of micro-batch %d: %w", i, err)
			}
			stats.Add(res.Stats)
			if err := be.Backward(res.DLogp); err != nil {
				return stats, 0, fmt.Errorf("backward of micro-batch %d: %w", i, err)
			}
		}
		gn, err := be.Step(t.optimizer())
		if err != nil {
			return stats, 0, fmt.Errorf("optimizer step: %w", err)
		}
		gradNorm = gn
	}
	t.phase("train", t0)
	return stats, gradNorm, nil
}

func (t *Trainer) record(groups []*group.Group, b *batch.Batch, p *prefixtree.Packing, st loss.Stats, gradNorm float64, elapsed time.Duration) {
	m := t.d.Metrics
	m.Steps.Inc()
	m.Version.Set(float64(t.version))
	m.StepSeconds.Observe(elapsed.Seconds())
	if s := elapsed.Seconds(); s > 0 {
		m.TokensPerSecond.Set(float64(p.OriginalTokens) / s)
	}
	m.TreeTokenRatio.Set(p.TokenRatio())
	m.PackedTokens.Add(float64(p.PackedTokens))
	m.OriginalTokens.Add(float64(p.OriginalTokens))
	m.LossTokens.Add(float64(p.LossTokens))
	m.MicroBatches.Set(float64(len(p.MicroBatches)))
	m.Loss.Set(st.Loss)
	m.GradNorm.Set(gradNorm)
	m.Entropy.Set(st.Entropy())
	m.ClipFraction.Set(st.ClipFraction())
	m.ApproxKL.Set(st.ApproxKL())
	m.ImportanceWeight.Set(st.Ratio())
	m.BehavWeight.Set(st.BehavWeight())
	m.BehavWeightMax.Set(st.BehavWMax)
	m.BehavCapFraction.Set(st.CapFraction())
	m.Advantage.Set(st.Advantage())
	m.StalenessMax.Set(float64(b.MaxStaleness))
	if b.StalenessTokens > 0 {
		m.StalenessMean.Set(b.StalenessMean())
	}
	m.TokensAhead.Add(float64(b.AheadTokens))
	if b.AheadTokens > 0 && !t.warnedAhead {
		t.warnedAhead = true
		t.d.Log.Warn("loss tokens carry a policy version newer than the trainer's: the inference servers number their weights "+
			"otherwise (a server not reloaded by this trainer, or one started from a checkpoint at another step); "+
			"these tokens are left out of the staleness and counted in tokens_ahead_of_trainer (warned once)",
			"step", t.step, "trainer_version", t.version-1, "tokens_ahead", b.AheadTokens, "max_ahead", b.MaxAhead, "loss_tokens", b.LossTokens)
	}
	sum, cnt := map[string]float64{}, map[string]int{}
	var all float64
	var episodes int
	for _, g := range groups {
		for _, mem := range g.Members {
			sum[g.Domain] += mem.Traj.Reward
			cnt[g.Domain]++
			all += mem.Traj.Reward
			episodes++
		}
	}
	for d, s := range sum {
		m.Reward.WithLabelValues(d).Set(s / float64(cnt[d]))
		m.Episodes.WithLabelValues(d).Add(float64(cnt[d]))
	}
	var generated int
	for _, g := range groups {
		for _, mem := range g.Members {
			generated += mem.Traj.GeneratedTokens()
		}
	}
	// These names are steps.jsonl's (schemas/steplog) and the checkpoint state's metrics;
	// tau2-eval plot reads reward, behav_abs_diff and behav_cap_fraction.
	t.last = map[string]float64{
		"loss": st.Loss, "grad_norm": gradNorm, "entropy": st.Entropy(), "clip_fraction": st.ClipFraction(),
		"tree_token_ratio": p.TokenRatio(), "reward": all / float64(max(episodes, 1)), "loss_tokens": float64(p.LossTokens),
		"original_tokens": float64(p.OriginalTokens), "packed_tokens": float64(p.PackedTokens), "step_seconds": elapsed.Seconds(),
		"episodes": float64(episodes), "generated_tokens": float64(generated),
		"behav_abs_diff": st.BehavAbsDiff(), "behav_cap_fraction": st.CapFraction(), "behav_weight_max": st.BehavWMax,
		"approx_kl": st.ApproxKL(), "staleness_max": float64(b.MaxStaleness),
		// Staleness at training time: version lag of the loss tokens (trainer version − the
		// version that sampled them), mean over the step's loss tokens that carry a version no
		// newer than the trainer's; those ahead of it (misconfigured servers) are counted apart.
		"staleness_mean": b.StalenessMean(), "tokens_ahead_of_trainer": float64(b.AheadTokens),
	}
	t.acct.flush(t.last, t.pendingEpisodes()) // where the episodes received since the last step went
	t.gauges()
}

// checkpoint saves the weights, optimizer state and trainer state, commits offsets, reloads the
// servers and publishes the version, in that order.
func (t *Trainer) checkpoint(ctx context.Context) error {
	t0 := time.Now()
	// The tracker now treats the steps as checkpointed; if Save fails below, the error is fatal
	// (the process restarts from the previous checkpoint), so nothing is committed early.
	targets, above := t.tracker.Checkpointed(t.step)
	// Partitions restored from an earlier checkpoint but not seen since keep their targets.
	seen := map[offsets.TopicPartition]bool{}
	for _, o := range targets {
		seen[offsets.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = true
	}
	for tp, next := range t.resumeFrom {
		if !seen[tp] {
			targets = append(targets, offsets.Target{Topic: tp.Topic, Partition: tp.Partition, Next: next})
		}
	}
	st := checkpoint.State{Version: t.version, Step: t.step, Time: t.d.Now().UTC(), Offsets: targets, TrainedAbove: above, Metrics: t.last}
	if t.d.Admission != nil {
		a, err := t.d.Admission.State()
		if err != nil {
			return err
		}
		st.Admission = a
	}
	be := t.d.Backend
	if t.d.Feed != nil {
		be = hostsSaver{Group: be.(*dp.Group), feed: t.d.Feed}
	}
	path, err := t.ckpt.SaveBackend(st, be, t.dtype)
	if err != nil {
		return fmt.Errorf("step %d: %w", t.step, err)
	}
	t.checkpointedStep = t.step
	t.d.Metrics.Checkpoints.Inc()
	t.phase("checkpoint", t0)

	// A failed commit is not fatal: the checkpoint records the targets, so after a restart the
	// messages below them are skipped anyway, and the next checkpoint commits again.
	if err := t.d.Source.Commit(ctx, targets); err != nil {
		t.d.Metrics.CommitErrors.Inc()
		t.d.Log.Error("offset commit failed; retried at the next checkpoint", "step", t.step, "err", err)
	}
	t.announce(ctx, path)
	t.d.Log.Info("checkpoint", "version", t.version, "path", path, "offsets", len(targets), "trained_above", len(above))
	return nil
}

// announce asks the inference servers to load the checkpoint at path (or, with path "", the
// backend's weights from memory: MemoryReloader), then publishes its version, in that order: a version is published only once the servers serve it. Failures are
// logged and counted, not fatal: the servers keep their weights and the next checkpoint (or
// restart) announces again.
func (t *Trainer) announce(ctx context.Context, path string) {
	if t.d.Reloader != nil {
		t0 := time.Now()
		if err := t.d.Reloader.LoadWeights(ctx, path, t.version); err != nil {
			// Servers keep the previous weights; publishing the version now would mislabel their
			// tokens. The next checkpoint retries.
			t.d.Metrics.ReloadErrors.Inc()
			t.d.Metrics.BusySeconds.WithLabelValues(BusyWeightSync).Add(time.Since(t0).Seconds())
			t.d.Log.Error("inference servers did not reload; version not published", "version", t.version, "path", path, "err", err)
			return
		}
		t.phase("reload", t0)
	}
	if t.d.Versions != nil {
		defer t.phase("publish", time.Now())
		pv := schemas.PolicyVersion{Version: t.version, CheckpointPath: path, Time: t.d.Now().UTC(), InMemory: path == ""}
		if err := t.d.Versions.PublishVersion(ctx, pv); err != nil {
			t.d.Metrics.PublishErrors.Inc()
			t.d.Log.Error("policy version not published", "version", t.version, "err", err)
		}
	}
}
