package step

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"tau2rl/gpu/dp"
	"tau2rl/lib/logs"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/feed"
	"tau2rl/trainer/loss"
	"tau2rl/trainer/prefixtree"
)

// A trainer over several hosts (docs/MULTIGPU.md, "Several hosts"): host 0 runs this package's
// Trainer with Deps.Feed, the leader's end of trainer/feed; every other host runs Follow on its
// own dp.Group, whose comms carry global ranks of the same world. For each optimizer update the
// leader sends the update's inputs (the packing, the loss sequences and the actor settings) and
// then runs updateParallel itself; each follower runs the same updateParallel on its local ranks
// with those inputs, and the collectives inside keep all hosts in lockstep. Loss statistics come
// back in the followers' acknowledgements and are added to the leader's. At a checkpoint every
// follower writes its ranks' optimizer shards into the leader's temporary checkpoint directory
// (a file system all hosts share, at the same path) before the leader publishes it.

// actorOf is the part of the actor settings an update uses, as the feed carries it.
func actorOf(a ActorConfig) feed.Actor {
	return feed.Actor{Optimizer: a.Optimizer, Loss: a.Config, PPONMinibatches: a.PPONMinibatches, RecomputeLogprob: a.RecomputeLogprob}
}

// updateHosts is updateParallel on the leader of several hosts: the followers get the inputs
// first, a follower that fails meanwhile aborts the local ranks (they would wait forever in a
// collective its ranks never join), and the followers' statistics are added to the leader's.
func (t *Trainer) updateHosts(g *dp.Group, p *prefixtree.Packing, seqs []loss.Seq) (loss.Stats, float64, error) {
	l := t.d.Feed
	a := t.cfg.Actor
	a.Optimizer = t.optimizer() // the followers step with this step's scheduled rate
	seq, err := l.Send(feed.Message{Kind: feed.Step, Step: &feed.StepData{Actor: actorOf(a), Packing: p, Seqs: seqs}})
	if err != nil {
		g.Abort(err)
		return loss.Stats{}, 0, err
	}
	stop := watchFollowers(l, g)
	stats, gradNorm, err := t.updateParallel(g, p, seqs)
	stop()
	if err != nil {
		if ferr := l.Err(); ferr != nil {
			return stats, 0, fmt.Errorf("%w (local ranks: %v)", ferr, err)
		}
		g.Abort(err)
		return stats, 0, err
	}
	acks, err := l.Wait(seq)
	if err != nil {
		g.Abort(err)
		return stats, 0, err
	}
	for _, a := range acks {
		stats.Add(a.Stats)
	}
	return stats, gradNorm, nil
}

// watchFollowers aborts g, whose ranks may be waiting in a collective for the followers' ranks,
// when a follower fails or the request has not finished within the feed's timeout (a host is
// stuck: NCCL itself would wait forever), until stop is called.
func watchFollowers(l *feed.Leader, g *dp.Group) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		timer := time.NewTimer(l.Timeout())
		defer timer.Stop()
		select {
		case <-l.Failed():
			g.Abort(l.Err())
		case <-timer.C:
			g.Abort(fmt.Errorf("feed: the hosts did not finish the request within %v (a host is stuck?)", l.Timeout()))
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// hostsSaver is the leader's data-parallel group at a checkpoint: its optimizer state is every
// host's shards, the followers writing theirs into the same (shared) directory while the leader
// writes its own, acknowledged before checkpoint.Manager checks the set and publishes it.
type hostsSaver struct {
	*dp.Group
	feed *feed.Leader
}

func (h hostsSaver) SaveOptimizerState(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	seq, err := h.feed.Send(feed.Message{Kind: feed.Checkpoint, Dir: abs})
	if err != nil {
		return err
	}
	local := h.Group.SaveOptimizerState(abs)
	_, err = h.feed.Wait(seq)
	return errors.Join(local, err)
}

// LoadOptimizerHosts restores checkpoint dir's optimizer state on every host of a trainer with a
// feed: the followers are told to load it too (restoring all-gathers the weights, a collective),
// and their acknowledgements awaited. Without a feed it is m.LoadOptimizer.
func LoadOptimizerHosts(m *checkpoint.Manager, dir string, st checkpoint.State, g *dp.Group, l *feed.Leader) (bool, error) {
	if l == nil || st.Optimizer != checkpoint.OptimizerSaved {
		// Nothing to load on any host (the followers are told nothing and load nothing).
		return m.LoadOptimizer(dir, st, g)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false, err
	}
	seq, err := l.Send(feed.Message{Kind: feed.Restore, Dir: abs})
	if err != nil {
		return false, err
	}
	stop := watchFollowers(l, g)
	ok, err := m.LoadOptimizer(abs, st, g)
	stop()
	if ferr := l.Err(); err != nil && ferr != nil {
		return false, fmt.Errorf("%w (local ranks: %v)", ferr, err)
	}
	if err != nil {
		g.Abort(err) // the followers may be waiting in the all-gather
		return false, err
	}
	if _, err := l.Wait(seq); err != nil {
		g.Abort(err)
		return false, err
	}
	return ok, nil
}

// Follow runs a follower host: it takes the leader's requests from f and runs them on g, the
// host's local ranks, until the leader says goodbye (nil) or something fails (the error, after
// telling the leader). Metrics may be nil.
//
// ctx ending (SIGTERM) does not stop it at once: when every host is stopped together the
// leader's shutdown checkpoint still needs this host's shards, so it keeps serving until the
// goodbye that follows that checkpoint, for at most f's timeout, then leaves (ctx's error).
func Follow(ctx context.Context, g *dp.Group, f *feed.Follower, m *Metrics, log *slog.Logger) error {
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return err
		}
	}
	log = logs.OrDiscard(log)
	var mu sync.Mutex
	var grace *time.Timer
	stop := context.AfterFunc(ctx, func() {
		log.Info("stopping: waiting for the leader's shutdown checkpoint and goodbye", "at_most", f.Timeout())
		mu.Lock()
		grace = time.AfterFunc(f.Timeout(), func() { f.Close() })
		mu.Unlock()
	})
	defer func() {
		stop()
		mu.Lock()
		if grace != nil {
			grace.Stop()
		}
		mu.Unlock()
	}()
	for {
		req, err := f.Recv()
		if errors.Is(err, feed.ErrBye) {
			log.Info("the leader shut down")
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			g.Abort(err)
			return err
		}
		var stats loss.Stats
		switch req.Kind {
		case feed.Step:
			t := &Trainer{d: Deps{Metrics: m}}
			a := req.Step.Actor
			t.cfg.Actor = ActorConfig{Optimizer: a.Optimizer, Config: a.Loss, PPONMinibatches: a.PPONMinibatches, RecomputeLogprob: a.RecomputeLogprob}
			var gradNorm float64
			stats, gradNorm, err = t.updateParallel(g, req.Step.Packing, req.Step.Seqs)
			if err == nil {
				m.Steps.Inc()
				m.GradNorm.Set(gradNorm)
				log.Info("step", "request", req.Seq, "microbatches", len(req.Step.Packing.MicroBatches), "grad_norm", gradNorm)
			}
		case feed.Checkpoint:
			err = g.SaveOptimizerState(req.Dir)
		case feed.Restore:
			err = g.LoadOptimizerState(req.Dir)
			if err == nil {
				log.Info("optimizer state restored", "checkpoint", req.Dir)
			}
		}
		if err != nil {
			err = fmt.Errorf("%s %d: %w", req.Kind, req.Seq, err)
			g.Abort(err) // the leader's ranks may wait in a collective ours left
		}
		if aerr := f.Ack(req.Seq, stats, err); aerr != nil && err == nil {
			err = fmt.Errorf("feed: acknowledge %s %d: %w", req.Kind, req.Seq, aerr)
		}
		if err != nil {
			return err
		}
	}
}
