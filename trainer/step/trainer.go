// Package step is the trainer's main loop: consume scored trajectories, group them, and for
// every B complete groups run one policy-update step on the model backend; checkpoint, commit
// offsets, reload the inference servers and publish the new policy version; and issue rollout
// requests under admission control.
//
// One goroutine owns everything (grouping state, the backend, offsets); a second one only reads
// the Source, so Kafka fetching overlaps with training. Order of effects for a step whose
// checkpoint is due:
//
//	train (forward/backward/optimizer) → Save checkpoints/v<N> (atomic) → commit offsets →
//	reload inference servers → publish PolicyVersion{N}
//
// so a committed offset is always covered by a durable checkpoint, and producers learn of a
// version only once the servers serve it.
//
// Over several hosts (hosts.go) this Trainer runs on host 0 with Deps.Feed and the other hosts
// run Follow: they get each update's inputs over trainer/feed and write their optimizer shards
// into the same checkpoint before it is published.
package step

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/dp"
	"tau2rl/lib/logs"
	"tau2rl/schemas"
	"tau2rl/trainer/admission"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/feed"
	"tau2rl/trainer/group"
	"tau2rl/trainer/offsets"
)

// Message is one consumed message: its trajectories (none when the message could not be decoded
// and was dead-lettered by the source, or held no trajectories) and its position.
type Message struct {
	Trajectories []*schemas.Trajectory
	Topic        string
	Partition    int
	Offset       int64
}

// Source delivers trajectories and commits offsets: trainer/kafkaio in production (a
// lib/stream/kafka group reader with dead letters), an in-memory source in tests. Targets come
// from trainer/offsets, the lib/stream watermark gated by checkpoints.
type Source interface {
	// Next blocks until a message is available or ctx ends.
	Next(ctx context.Context) (Message, error)
	// Commit stores the given resume offsets.
	Commit(ctx context.Context, targets []offsets.Target) error
}

// Reloader tells the inference servers to load a checkpoint (SGLang /update_weights_from_disk,
// the vLLM equivalent, or a no-op). It matches lib/inference/llm's reloaders.
type Reloader interface {
	LoadWeights(ctx context.Context, path string, version int64) error
}

// MemoryReloader is a Reloader that may send the weights straight from the backend's memory
// (lib/inference/llm's reload.mode on CUDA IPC). While ReloadsFromMemory reports true (every server
// it reloads takes the weights so), the trainer also reloads after steps without a checkpoint,
// with an empty path, and publishes those versions as in_memory: the servers follow every step
// while checkpoints are written only every checkpoint.every steps, for recovery.
type MemoryReloader interface {
	Reloader
	ReloadsFromMemory() bool
}

// VersionPublisher announces a new policy version (the compacted policy-versions topic).
type VersionPublisher interface {
	PublishVersion(ctx context.Context, v schemas.PolicyVersion) error
}

// RequestPublisher publishes rollout requests (the rollout-requests topic).
type RequestPublisher interface {
	PublishRequests(ctx context.Context, reqs []schemas.RolloutRequest) error
}

// Deps are the trainer's collaborators. Backend and Source are required; the others may be nil
// (no reload, no version publishing, no admission).
type Deps struct {
	Backend   gpu.Backend
	Source    Source
	Reloader  Reloader
	Versions  VersionPublisher
	Requests  RequestPublisher
	Admission *admission.Manager
	// InitialWeights is the directory the backend's weights were loaded from when the trainer
	// starts fresh (model.path: a Hugging Face directory, config.json + *.safetensors, which
	// SGLang, vLLM and tau2-sampler load), as the servers see it; "" for a random
	// initialisation. Run reloads the servers from it, under the trainer's initial version,
	// before it issues a rollout request (announceStart); without it, and unless every server
	// takes the weights from memory, Run first writes the weights to checkpoint.dir/initial
	// (InitialDir) for them. Ignored when Restore resumed from a checkpoint.
	InitialWeights string
	// Feed, when set, makes this trainer the leader of several hosts (trainer/feed, Follow):
	// Backend must be the local ranks' *dp.Group, and every update and checkpoint includes the
	// follower hosts. The caller closes it after Run.
	Feed    *feed.Leader
	Metrics *Metrics
	// Log receives the component's messages; nil discards (lib/logs).
	Log *slog.Logger
	// Now is the clock (time.Now when nil); tests drive timeouts with it.
	Now func() time.Time
}

// Trainer runs the loop. Create it with New, optionally Restore a checkpoint state, then Run.
type Trainer struct {
	cfg   Config
	d     Deps
	dtype gpu.DType
	ckpt  *checkpoint.Manager

	version int64
	step    int64
	// checkpointedStep is the last step covered by a checkpoint.
	checkpointedStep int64
	grouper          *group.Grouper
	restoredFrom     string // the checkpoint Restore resumed from, announced again by Run
	// warnedAhead is set once a step's loss tokens carried versions newer than the trainer's.
	warnedAhead bool
	tracker     *offsets.Tracker
	ready       []*group.Group
	// resumeFrom holds the commit targets of the restored checkpoint: messages below them were
	// processed before the restart.
	resumeFrom map[offsets.TopicPartition]int64
	// last holds metrics of the last step for the checkpoint state.
	last map[string]float64
	// progress mirrors step and version for readers on other goroutines.
	progressStep, progressVersion atomic.Int64
	// lastProgress is when the trainer last stepped or said why it waits; dropped counts the
	// groups discarded since then by outcome (reportWaiting).
	lastProgress time.Time
	dropped      map[string]int
	// acct counts where the trajectories received since the last step record went (accounting.go).
	acct accounting
}

// waitLogEvery is how often a trainer that takes no step says why at the default log level.
const waitLogEvery = 30 * time.Second

// New validates cfg and builds a trainer at version 0.
func New(cfg Config, d Deps) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Backend == nil || d.Source == nil {
		return nil, errors.New("step: a backend and a source are required")
	}
	if _, ok := d.Backend.(*dp.Group); d.Feed != nil && !ok {
		return nil, fmt.Errorf("step: a trainer over several hosts needs a data-parallel backend (*dp.Group), got %T", d.Backend)
	}
	if d.Metrics == nil {
		m, err := NewMetrics(nil)
		if err != nil {
			return nil, err
		}
		d.Metrics = m
	}
	d.Log = logs.OrDiscard(d.Log)
	if d.Now == nil {
		d.Now = time.Now
	}
	dtype, _ := gpu.ParseDType(cfg.Checkpoint.DType)
	gcfg := cfg.Group
	gcfg.VocabSize = d.Backend.Config().VocabSize // a token the model cannot embed excludes its episode
	g, err := group.New(gcfg)
	if err != nil {
		return nil, err
	}
	return &Trainer{
		cfg: cfg, d: d, dtype: dtype,
		ckpt:    &checkpoint.Manager{Dir: cfg.Checkpoint.Dir, Keep: cfg.Checkpoint.Keep, Log: d.Log},
		grouper: g, tracker: offsets.New(), resumeFrom: map[offsets.TopicPartition]int64{}, dropped: map[string]int{},
	}, nil
}

// Restore continues from a checkpoint state: its version and step, offsets below its commit
// targets are skipped, trajectories it trained above them are ignored when redelivered, and the
// admission state is restored. The caller has already loaded the checkpoint's weights and
// optimizer state into the backend (cpu.Load or the like, then checkpoint.Manager.LoadOptimizer),
// so the next step is the one an uninterrupted run would have taken.
func (t *Trainer) Restore(st checkpoint.State) error {
	t.version, t.step, t.checkpointedStep = st.Version, st.Step, st.Step
	// Version 0 too: the backend holds v0's weights, not model.path's, so v0 is what the servers
	// must load (announceStart). A state without its directory (checkpoint.start_fresh's
	// numbering) announces nothing here: the trainer starts from its initial weights.
	if p := t.ckpt.Path(st.Version); verified(p) {
		t.restoredFrom = p // announced again when Run starts
	}
	for _, o := range st.Offsets {
		t.resumeFrom[offsets.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Next
	}
	t.publishProgress()
	t.grouper.Remember(st.TrainedAbove...)
	if t.d.Admission != nil {
		if err := t.d.Admission.Restore(st.Admission); err != nil {
			return err
		}
	}
	t.d.Metrics.Version.Set(float64(t.version))
	return nil
}

// verified reports whether dir is a complete checkpoint (checkpoint.Verify).
func verified(dir string) bool {
	_, err := checkpoint.Verify(dir)
	return err == nil
}

// Version returns the current policy version. Safe for concurrent use.
func (t *Trainer) Version() int64 { return t.progressVersion.Load() }

// Step returns the number of steps taken. Safe for concurrent use.
func (t *Trainer) Step() int64 { return t.progressStep.Load() }

func (t *Trainer) publishProgress() {
	t.progressStep.Store(t.step)
	t.progressVersion.Store(t.version)
}

type fetched struct {
	msg Message
	err error
}

// Run consumes and trains until ctx ends (returns nil after a final checkpoint of any
// unsaved steps), MaxSteps is reached, or an unrecoverable error occurs.
func (t *Trainer) Run(ctx context.Context) error {
	if err := t.ckpt.CleanTemp(); err != nil {
		return err
	}
	rctx, stopReader := context.WithCancel(ctx)
	defer stopReader()
	msgs := make(chan fetched, 1)
	go func() {
		for {
			m, err := t.d.Source.Next(rctx)
			select {
			case msgs <- fetched{m, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(t.cfg.Tick)
	defer tick.Stop()
	if err := t.announceStart(ctx); err != nil {
		return err
	}
	if err := t.admit(ctx); err != nil {
		return err
	}
	var followerFailed <-chan struct{} // nil without followers: never ready
	if t.d.Feed != nil {
		followerFailed = t.d.Feed.Failed()
	}
	for {
		if t.cfg.MaxSteps > 0 && t.step >= t.cfg.MaxSteps {
			return t.finish(ctx)
		}
		waitStart := time.Now()
		select {
		case <-ctx.Done():
			// Save what was trained; use a fresh context since ctx is done.
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			return t.finish(fctx)
		case f := <-msgs:
			t.waited(waitStart)
			if f.err != nil {
				if ctx.Err() != nil {
					continue // shutting down; handled by the Done case
				}
				return fmt.Errorf("step: source: %w", f.err)
			}
			if err := t.handle(f.msg); err != nil {
				return err
			}
		case <-followerFailed:
			// A follower host left while this one waited for data: the next step could not run.
			return fmt.Errorf("step: %w", t.d.Feed.Err())
		case <-tick.C:
			t.waited(waitStart)
			if err := t.expire(); err != nil {
				return err
			}
			t.reportWaiting()
		}
		for len(t.ready) >= t.cfg.BatchSize && (t.cfg.MaxSteps == 0 || t.step < t.cfg.MaxSteps) {
			if err := t.trainStep(ctx); err != nil {
				return err
			}
		}
		if err := t.admit(ctx); err != nil {
			return err
		}
	}
}

// announceStart makes the inference servers serve this trainer's weights under its version
// before Run issues a rollout request, resumed or not.
//
// A run resumed from checkpoint vN announces vN again. The previous process may have died between
// saving vN and announcing it, its reload may have failed (a server down), or the versions topic
// may hold a lower version: producers would then tag every episode with that version and this
// trainer, at vN, would drop each one as stale and never step again.
//
// A fresh run (no checkpoint to resume from) reloads the servers with its initial weights under
// its initial version (0, or N after checkpoint.start_fresh). The servers may have been started
// from anything: tau2-sampler reports the step of the checkpoint it loaded as its version (557
// for an SFT checkpoint at step 557), another run's server its own; without the reload the
// tokens sampled before the first step's reload would carry that version, not the trainer's,
// and the version spans could not show which weights sampled them. The weights come, in order
// of preference: from memory when every server takes them so (CUDA IPC, milliseconds); from
// Deps.InitialWeights (model.path; a server on the trainer's GPU in reload.mode=auto still
// takes them by IPC); or from the weights written now to checkpoint.dir/initial (InitialDir: a
// random initialisation has no file). That directory is not a checkpoint (no optimizer or
// trainer state, not a v<N>: never resumed from, listed or pruned as one); a restart before the
// first step starts fresh again and rewrites it. Without a reloader nothing is reloaded or
// published, as before.
//
// A failed reload is logged and counted, not fatal (announce): the servers then keep their own
// version, and the steps count the tokens ahead of the trainer's version
// (tokens_ahead_of_trainer) instead of averaging a negative lag into the staleness.
func (t *Trainer) announceStart(ctx context.Context) error {
	if t.restoredFrom != "" {
		t.announce(ctx, t.restoredFrom)
		return nil
	}
	if t.d.Reloader == nil {
		return nil
	}
	if r, ok := t.d.Reloader.(MemoryReloader); ok && r.ReloadsFromMemory() {
		t.announce(ctx, "")
		return nil
	}
	path := t.d.InitialWeights
	if path == "" {
		var err error
		if path, err = t.writeInitial(); err != nil {
			return err
		}
		t.d.Log.Info("initial weights written for the inference servers", "version", t.version, "path", path)
	}
	t.d.Log.Info("reloading the inference servers with the initial weights", "version", t.version, "path", path)
	t.announce(ctx, path)
	return nil
}

// InitialDir is the directory under checkpoint.dir where a fresh trainer without model.path
// writes its initial weights for the inference servers (announceStart).
const InitialDir = "initial"

// writeInitial writes the backend's weights (Hugging Face layout, checkpoint.dtype) to
// checkpoint.dir/InitialDir, replacing what an earlier fresh start left there, and returns its
// absolute path. The directory appears complete or not at all (written aside, then renamed).
func (t *Trainer) writeInitial() (string, error) {
	final, err := filepath.Abs(filepath.Join(t.cfg.Checkpoint.Dir, InitialDir))
	if err != nil {
		return "", fmt.Errorf("step: initial weights: %w", err)
	}
	tmp := filepath.Join(filepath.Dir(final), ".tmp-"+InitialDir)
	fail := func(err error) (string, error) {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("step: initial weights for the inference servers (no model.path) in %s: %w", final, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return fail(err)
	}
	if err := t.d.Backend.Save(tmp, t.dtype); err != nil {
		return fail(err)
	}
	if err := os.RemoveAll(final); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fail(err)
	}
	return final, nil
}

// finish checkpoints steps not yet covered by a checkpoint.
func (t *Trainer) finish(ctx context.Context) error {
	if t.step > t.checkpointedStep {
		return t.checkpoint(ctx)
	}
	return nil
}

// handle routes the trajectories of one message.
func (t *Trainer) handle(m Message) error {
	t.d.Metrics.Messages.Inc()
	tp := offsets.TopicPartition{Topic: m.Topic, Partition: m.Partition}
	if next, ok := t.resumeFrom[tp]; ok && m.Offset < next {
		t.d.Metrics.Trajectories.WithLabelValues("resumed").Add(float64(len(m.Trajectories)))
		return nil // processed before the restart
	}
	if len(m.Trajectories) == 0 {
		t.d.Metrics.EmptyMessages.Inc()
	}
	t.acct.received += len(m.Trajectories)
	h := t.tracker.Track(tp, m.Offset, len(m.Trajectories))
	now := t.d.Now()
	for _, tr := range m.Trajectories {
		if tr == nil {
			return fmt.Errorf("step: %s/%d@%d: nil trajectory", m.Topic, m.Partition, m.Offset)
		}
		grp, verdict := t.grouper.Add(group.Member{Traj: tr, Handle: uint64(h)}, now, t.version, t.cfg.MaxHeadOffpolicyness)
		t.d.Metrics.Trajectories.WithLabelValues(verdict.String()).Inc()
		if verdict != group.Accepted {
			t.acct.discard(verdict.String(), 1)
			if verdict == group.Stale {
				t.d.Metrics.StaleDropped.Inc()
			}
			if verdict == group.OutOfVocabulary {
				tok, _ := group.OutsideVocabulary(tr, t.grouper.VocabSize())
				t.d.Log.Warn("trajectory not trained: a token id is outside the model's vocabulary (was it produced by another model or tokenizer?)",
					"trajectory", tr.ID, "task", group.Key(tr), "token", tok, "vocab_size", t.grouper.VocabSize())
			}
			if err := t.discard(group.Member{Traj: tr, Handle: uint64(h)}); err != nil {
				return err
			}
		}
		if grp != nil {
			if err := t.release(grp); err != nil {
				return err
			}
		}
	}
	t.gauges()
	return nil
}

// discard resolves a member that will not be trained.
func (t *Trainer) discard(m group.Member) error {
	if t.d.Admission != nil {
		t.d.Admission.Finished(m.Traj.RequestID, m.Traj.ID)
	}
	if err := t.tracker.Discard(offsets.Handle(m.Handle)); err != nil {
		return fmt.Errorf("step: trajectory %s: %w", m.Traj.ID, err)
	}
	return nil
}

func (t *Trainer) discardGroup(g *group.Group, outcome string) error {
	t.d.Metrics.Groups.WithLabelValues(outcome).Inc()
	t.dropped[outcome]++
	t.acct.discard(outcome, len(g.Members))
	for _, m := range g.Members {
		if err := t.discard(m); err != nil {
			return err
		}
	}
	return nil
}

// release filters a complete group and queues it for training. A group that its excluded
// episodes (infra errors, ungraded episodes) completed with fewer than min_size members is
// dropped: a group baseline needs that many rewards.
func (t *Trainer) release(g *group.Group) error {
	if len(g.Members) < t.grouper.MinSize() {
		t.d.Log.Debug("group dropped: too few trainable episodes", "group", g.Key, "members", len(g.Members), "excluded", g.Excluded)
		return t.discardGroup(g, "too_few_trainable")
	}
	if keep, reason := t.cfg.Actor.Advantage.Filter(t.cfg.Sequences.AdvantageInput(g)); !keep {
		t.d.Log.Debug("group filtered", "group", g.Key, "reason", reason, "members", len(g.Members))
		return t.discardGroup(g, "filtered_"+reason)
	}
	t.d.Metrics.Groups.WithLabelValues("ready").Inc()
	t.ready = append(t.ready, g)
	return nil
}

// expire handles group and request timeouts.
func (t *Trainer) expire() error {
	now := t.d.Now()
	ready, dropped := t.grouper.Expire(now)
	for _, g := range dropped {
		t.d.Log.Info("incomplete group dropped", "group", g.Key, "members", len(g.Members))
		if err := t.discardGroup(g, "timeout_dropped"); err != nil {
			return err
		}
	}
	for _, g := range ready {
		t.d.Metrics.Groups.WithLabelValues("timeout_partial").Inc()
		if err := t.release(g); err != nil {
			return err
		}
	}
	if t.d.Admission != nil {
		stale, timedOut := t.d.Admission.Expire(t.version, now)
		t.d.Metrics.ExpiredRequests.WithLabelValues("stale").Add(float64(stale))
		t.d.Metrics.ExpiredRequests.WithLabelValues("timeout").Add(float64(timedOut))
	}
	t.gauges()
	return nil
}

// admit publishes as many rollout requests as admission allows.
func (t *Trainer) admit(ctx context.Context) error {
	a := t.d.Admission
	if a == nil || t.d.Requests == nil {
		return nil
	}
	stale, timedOut := a.Expire(t.version, t.d.Now())
	t.d.Metrics.ExpiredRequests.WithLabelValues("stale").Add(float64(stale))
	t.d.Metrics.ExpiredRequests.WithLabelValues("timeout").Add(float64(timedOut))
	if a.Capacity() == 0 {
		return nil
	}
	reqs, err := a.Issue(t.version, t.d.Now())
	if err != nil {
		a.Cancel(reqs)
		return err
	}
	if err := t.d.Requests.PublishRequests(ctx, reqs); err != nil {
		a.Cancel(reqs)
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("step: publish %d rollout requests: %w", len(reqs), err)
	}
	t.d.Metrics.Requests.Add(float64(len(reqs)))
	t.d.Metrics.LiveRequests.Set(float64(a.Live()))
	return nil
}

// reportWaiting logs, at most every waitLogEvery while no step is taken, what the trainer waits
// for: groups ready of batch_size, incomplete groups, and the groups dropped meanwhile and why.
// A trainer fed only equal-reward groups (all of them filtered) otherwise looks hung: the
// filtering is a debug message per group.
func (t *Trainer) reportWaiting() {
	now := t.d.Now()
	if t.lastProgress.IsZero() {
		t.lastProgress = now
		return
	}
	if now.Sub(t.lastProgress) < waitLogEvery {
		return
	}
	args := []any{"step", t.step, "ready_groups", len(t.ready), "batch_size", t.cfg.BatchSize,
		"incomplete_groups", t.grouper.OpenGroups(), "waited", now.Sub(t.lastProgress).Round(time.Second)}
	outcomes := make([]string, 0, len(t.dropped))
	for o := range t.dropped {
		outcomes = append(outcomes, o)
	}
	slices.Sort(outcomes)
	for _, o := range outcomes {
		args = append(args, "dropped_"+o, t.dropped[o])
	}
	if t.dropped["filtered_equal_rewards"] > 0 {
		args = append(args, "hint", "groups whose members all have the same reward carry no GRPO signal and are dropped "+
			"(actor.advantage.drop_equal_rewards=false keeps them)")
	}
	t.d.Log.Info("waiting for groups", args...) // cmd/tau2-run passes this line on by its words
	t.lastProgress = now
	clear(t.dropped)
}

func (t *Trainer) gauges() {
	t.d.Metrics.PendingGroups.Set(float64(t.grouper.OpenGroups()))
	t.d.Metrics.ReadyGroups.Set(float64(len(t.ready)))
	if t.d.Admission != nil {
		t.d.Metrics.LiveRequests.Set(float64(t.d.Admission.Live()))
	}
}
