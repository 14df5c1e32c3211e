// Package rollout is the rollout-producer service behind tau2-producer: it
// takes rollout requests from Kafka in the consumer group "producers", runs
// each request's group of τ² episodes (tau2/episode) concurrently,
// shapes their rewards (producers/shaping) and publishes the scored
// trajectories, then commits the request.
//
// Guarantees:
//   - A request is committed only after its whole group is published (acks
//     from all in-sync replicas), in offset order per partition; a producer
//     that crashes or is killed leaves its requests uncommitted, so the
//     group's next member runs them again (at-least-once).
//   - A group is published as one Kafka message (key = task id) when it fits
//     max_message_bytes, else one message per trajectory in one write.
//   - An infrastructure failure (LLM error after retries, evaluator error,
//     timeout, cancellation) is published to the infra-errors topic as a
//     schemas.InfraError and, unless publish_infra_trajectories is off, as a
//     trajectory with status infra_error; never as a reward of 0.
//   - Requests staler than max_head_offpolicyness versions behind the latest
//     policy version (from the policy-versions topic and from requests), or
//     past their stale_after_version, are dropped and counted.
//   - On shutdown the service stops fetching, lets running groups finish
//     within shutdown_grace, then cancels the rest without publishing or
//     committing them (they are redelivered).
//   - A message that is not a valid rollout request, or names an unknown
//     task, goes to dead letters and is committed.
package rollout

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"tau2rl/lib/logs"
	"tau2rl/lib/seen"
	"tau2rl/lib/stream"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/lib/uuid"
	"tau2rl/producers/shaping"
	"tau2rl/schemas"
	"tau2rl/tau2/data"
	"tau2rl/tau2/episode"
)

// Source is the consumer-group subscription of the request topic: the part of a stream.Source
// the service uses (its owner closes it).
type Source interface {
	Fetch(ctx context.Context) (stream.Message, error)
	Commit(ctx context.Context, msgs ...stream.Message) error
}

// DeadLetterer publishes messages that cannot be processed (lib/stream/kafka's DeadLetters).
type DeadLetterer = stream.DeadLetterer

// Publisher publishes framed messages and returns once they are
// acknowledged (*kafka.Writer).
type Publisher interface {
	PublishFramed(ctx context.Context, msgs ...schemas.Framed) error
}

// EpisodeRunner runs one episode (*episode.Runner).
type EpisodeRunner interface {
	Run(ctx context.Context, in episode.Input) *episode.Result
}

// RunnerSource gives the runner of a domain (*Runners).
type RunnerSource interface {
	For(domain string) (*episode.Runner, error)
}

// Versions tracks the latest policy version known to the producer. It is
// safe for concurrent use.
type Versions struct{ v atomic.Int64 }

// Observe raises the latest version to v (it never goes down).
func (vs *Versions) Observe(v int64) {
	for {
		cur := vs.v.Load()
		if v <= cur || vs.v.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Latest returns the latest version.
func (vs *Versions) Latest() int64 { return vs.v.Load() }

// Deps are the service's collaborators.
type Deps struct {
	Source       Source
	DeadLetters  DeadLetterer
	Trajectories Publisher
	InfraErrors  Publisher
	// Runners give the episode runner per domain.
	Runners RunnerSource
	// Tasks looks a task up ("" split = all tasks); default
	// episode.LoadTasks on cfg.DataDir.
	Tasks    func(domain, split string) (*episode.TaskSet, error)
	Versions *Versions
	Metrics  *Metrics
	// Log receives the component's messages; nil discards (lib/logs).
	Log *slog.Logger
	// MaxMessageBytes is the Kafka message limit, to decide whether a group
	// fits one message. Default kafka.DefaultMaxMessageBytes.
	MaxMessageBytes int
}

// Summary counts what a Run did.
type Summary struct {
	Requests, Stale, Invalid, Duplicates, Published, Abandoned int
	Episodes, InfraErrors                                      int
}

// recentRequests is how many completed request ids the service remembers (lib/seen: the last n,
// first in first out) to drop a redelivered request it already published. A redelivery comes
// after a rebalance from the partition's committed offset, which trails the newest published
// request by the requests finished behind the oldest one still running: with `concurrency`
// episodes (default 1024) in flight, normally far fewer than this. An older copy is run again
// and its trajectories are dropped by id downstream (archiver, trainer).
const recentRequests = 4096

// Service is the rollout producer.
type Service struct {
	cfg   Config
	d     Deps
	shape shaping.Config
	m     *Metrics
	log   *slog.Logger
	sem   *semaphore.Weighted
	tr    *stream.Watermark

	commitMu sync.Mutex
	mu       sync.Mutex
	inflight map[string]*group // by request id
	recent   *seen.Set[string] // completed request ids, the last recentRequests (lib/seen)
	summary  Summary
	fatal    chan error
}

// New builds a service.
func New(cfg Config, d Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Source == nil || d.DeadLetters == nil || d.Trajectories == nil || d.InfraErrors == nil || d.Runners == nil {
		return nil, errors.New("rollout: Source, DeadLetters, Trajectories, InfraErrors and Runners are required")
	}
	if d.Tasks == nil {
		dir := cfg.DataDir
		d.Tasks = func(domain, split string) (*episode.TaskSet, error) { return episode.LoadTasks(dir, domain, split) }
	}
	if d.Versions == nil {
		d.Versions = &Versions{}
	}
	if d.Metrics == nil {
		m, err := NewMetrics(nil)
		if err != nil {
			return nil, err
		}
		d.Metrics = m
	}
	d.Log = logs.OrDiscard(d.Log)
	if d.MaxMessageBytes <= 0 {
		d.MaxMessageBytes = tkafka.DefaultMaxMessageBytes
	}
	return &Service{
		cfg: cfg, d: d, m: d.Metrics, log: d.Log.With("component", "producer"),
		shape: shaping.Config{TurnDiscount: cfg.Econfig.TurnDiscount, InvalidFormatPenalty: cfg.Econfig.InvalidFormatPenalty},
		sem:   semaphore.NewWeighted(int64(cfg.MaxConcurrentEpisodes)), tr: stream.NewWatermark(stream.RedeliveryRestart),
		inflight: map[string]*group{}, recent: seen.New[string](recentRequests), fatal: make(chan error, 1),
	}, nil
}

// Summary returns the counts so far.
func (s *Service) Summary() Summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.summary
}

// group is one request's episodes in flight.
type group struct {
	req     schemas.RolloutRequest
	tickets []stream.Message // messages (this one and redelivered copies) done with the group
	ticks   []*stream.Ticket
}

// Run consumes requests until ctx ends (or cfg.Episodes episodes have been
// started), then finishes in-flight groups within the shutdown grace. It
// returns nil on a clean stop, or the first fatal error (a fetch, publish,
// dead-letter or commit failure: the process should exit and be restarted,
// its uncommitted requests being redelivered).
func (s *Service) Run(ctx context.Context) error {
	// Episodes outlive ctx by the grace period: they get their own context.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	fetchErr := s.fetchLoop(ctx, work, &wg)
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	if pending := s.inFlight(); pending > 0 {
		s.log.Info("stopping: finishing in-flight groups", "groups", pending, "grace", s.cfg.ShutdownGrace)
	}
	select {
	case <-allDone:
	case err := <-s.fatal:
		cancelWork()
		<-allDone
		return err
	case <-time.After(s.cfg.ShutdownGrace):
		s.log.Warn("shutdown grace expired: cancelling in-flight episodes; their requests will be redelivered", "groups", s.inFlight())
		cancelWork()
		<-allDone
	}
	select {
	case err := <-s.fatal:
		return err
	default:
	}
	if fetchErr != nil && ctx.Err() == nil {
		return fetchErr
	}
	sum := s.Summary()
	s.log.Info("producer stopped", "requests", sum.Requests, "episodes", sum.Episodes, "published", sum.Published,
		"stale", sum.Stale, "infra_errors", sum.InfraErrors, "abandoned", sum.Abandoned)
	return nil
}

func (s *Service) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

func (s *Service) fetchLoop(ctx, work context.Context, wg *sync.WaitGroup) error {
	started := 0
	for s.cfg.Episodes == 0 || started < s.cfg.Episodes {
		select {
		case err := <-s.fatal:
			s.fatal <- err
			return nil
		default:
		}
		msg, err := s.d.Source.Fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, ErrRequestsDone) {
				s.log.Info("every request handed out: finishing the groups in flight", "episodes", started)
				return nil
			}
			return fmt.Errorf("rollout: fetch request: %w", err)
		}
		n, err := s.handle(ctx, work, msg, wg)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		started += n
	}
	s.log.Info("episode budget reached: no more requests", "episodes", started)
	return nil
}

// handle processes one fetched message and returns how many episodes it
// started.
func (s *Service) handle(ctx, work context.Context, msg stream.Message, wg *sync.WaitGroup) (int, error) {
	tk := s.tr.Add(stream.Partition{Topic: msg.Topic, Partition: msg.Partition}, msg.Offset, 1)
	var req schemas.RolloutRequest
	if err := schemas.UnframeControl(msg.Value, stream.HeaderMap(msg), &req); err != nil {
		return 0, s.deadLetter(ctx, msg, tk, err)
	}
	s.d.Versions.Observe(req.PolicyVersion)
	latest := s.d.Versions.Latest()
	s.m.PolicyVersion.Set(float64(latest))
	if reason := Stale(&req, latest, s.cfg.MaxHeadOffpolicyness); reason != "" {
		s.m.StaleDropped.Inc()
		s.m.Requests.WithLabelValues("stale").Inc()
		s.count(func(sm *Summary) { sm.Stale++ })
		s.log.Info("dropping stale request", "request", req.RequestID, "task", req.TaskID, "reason", reason)
		return 0, s.commit(ctx, msg, tk)
	}
	s.mu.Lock()
	if g := s.inflight[req.RequestID]; g != nil {
		// A redelivered copy of a request we are running: done with it.
		g.tickets, g.ticks = append(g.tickets, msg), append(g.ticks, tk)
		s.mu.Unlock()
		s.m.Requests.WithLabelValues("duplicate").Inc()
		s.count(func(sm *Summary) { sm.Duplicates++ })
		return 0, nil
	}
	dup := s.recent.Has(req.RequestID)
	s.mu.Unlock()
	if dup {
		s.m.Requests.WithLabelValues("duplicate").Inc()
		s.count(func(sm *Summary) { sm.Duplicates++ })
		return 0, s.commit(ctx, msg, tk)
	}
	domain := req.Domain
	if domain == "" {
		domain = s.cfg.Econfig.Domain
	}
	runner, err := s.d.Runners.For(domain)
	if err != nil {
		return 0, s.deadLetter(ctx, msg, tk, fmt.Errorf("rollout: request %s: domain %s: %w", req.RequestID, domain, err))
	}
	set, err := s.d.Tasks(domain, "")
	if err != nil {
		return 0, s.deadLetter(ctx, msg, tk, fmt.Errorf("rollout: request %s: %w", req.RequestID, err))
	}
	task, ok := set.Get(req.TaskID)
	if !ok {
		return 0, s.deadLetter(ctx, msg, tk, fmt.Errorf("rollout: request %s: domain %s has no task %q", req.RequestID, domain, req.TaskID))
	}
	// Admit the whole group (at most the whole capacity at once).
	w := min(int64(req.GroupSize), int64(s.cfg.MaxConcurrentEpisodes))
	if err := s.sem.Acquire(ctx, w); err != nil {
		return 0, err // shutting down: the request stays uncommitted
	}
	g := &group{req: req, tickets: []stream.Message{msg}, ticks: []*stream.Ticket{tk}}
	s.mu.Lock()
	s.inflight[req.RequestID] = g
	s.summary.Requests++
	s.mu.Unlock()
	s.m.Requests.WithLabelValues("started").Inc()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.runGroup(work, runner, task, domain, g, w)
	}()
	return req.GroupSize, nil
}

// Stale says why a request is too stale to run ("" if it is not), by the pipeline's one rule
// (schemas.TooStale): the latest version is past its stale_after_version (the trainer's
// schemas.StaleAfter), or more than maxOff versions ahead of the version it was issued at
// (the producer's own max_head_offpolicyness; maxOff < 0 disables that check).
func Stale(req *schemas.RolloutRequest, latest, maxOff int64) string {
	if req.StaleAfterVersion != nil && latest > *req.StaleAfterVersion {
		return fmt.Sprintf("latest version %d is past stale_after_version %d", latest, *req.StaleAfterVersion)
	}
	if maxOff >= 0 && schemas.TooStale(req.PolicyVersion, latest, maxOff) {
		return fmt.Sprintf("issued at version %d, latest %d, max_head_offpolicyness %d", req.PolicyVersion, latest, maxOff)
	}
	return ""
}

func (s *Service) count(f func(*Summary)) {
	s.mu.Lock()
	f(&s.summary)
	s.mu.Unlock()
}

func (s *Service) deadLetter(ctx context.Context, msg stream.Message, tk *stream.Ticket, cause error) error {
	s.log.Warn("dead-lettering rollout request", "partition", msg.Partition, "offset", msg.Offset, "err", cause)
	if err := s.d.DeadLetters.DeadLetter(ctx, msg, cause); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	s.m.Requests.WithLabelValues("invalid").Inc()
	s.count(func(sm *Summary) { sm.Invalid++ })
	return s.commit(ctx, msg, tk)
}

// commit marks a message done and commits what became committable (the stream.Watermark rule;
// a partition fetched again from an earlier offset after a rebalance starts over, so requests
// still running from before commit nothing). Commits are serialized so a partition's offset
// never moves backwards.
func (s *Service) commit(ctx context.Context, msg stream.Message, tk *stream.Ticket) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	o, ok, err := s.tr.Done(tk)
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	if !ok {
		return nil
	}
	if err := s.d.Source.Commit(ctx, stream.CommitPoint(o.Topic, o.Partition, o.Next)); err != nil {
		return fmt.Errorf("rollout: commit %s/%d@%d: %w", msg.Topic, msg.Partition, o.Next-1, err)
	}
	return nil
}

// runGroup runs a request's episodes, publishes them and commits the
// request; a fatal error is reported on s.fatal.
func (s *Service) runGroup(work context.Context, runner EpisodeRunner, task *data.Task, domain string, g *group, w int64) {
	req := g.req
	n := req.GroupSize
	results := make([]*episode.Result, n)
	slots := make(chan struct{}, w)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		slots <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-slots }()
			results[i] = s.runEpisode(work, runner, task, domain, req, i)
		}(i)
	}
	wg.Wait()
	s.sem.Release(w)
	defer func() {
		s.mu.Lock()
		delete(s.inflight, req.RequestID)
		s.mu.Unlock()
	}()
	if work.Err() != nil {
		// Shutdown grace expired: hand the request back.
		s.m.Abandoned.Add(float64(n))
		s.m.Requests.WithLabelValues("abandoned").Inc()
		s.count(func(sm *Summary) { sm.Abandoned++ })
		return
	}
	if err := s.publish(work, domain, req, results); err != nil {
		s.reportFatal(err)
		return
	}
	s.mu.Lock()
	s.recent.Add(req.RequestID)
	tickets, ticks := g.tickets, g.ticks
	s.summary.Published++
	s.mu.Unlock()
	s.m.Requests.WithLabelValues("published").Inc()
	for k := range tickets {
		if err := s.commit(work, tickets[k], ticks[k]); err != nil {
			s.reportFatal(err)
			return
		}
	}
}

func (s *Service) reportFatal(err error) {
	select {
	case s.fatal <- err:
	default:
	}
}

func (s *Service) runEpisode(work context.Context, runner EpisodeRunner, task *data.Task, domain string, req schemas.RolloutRequest, trial int) *episode.Result {
	s.m.EpisodesStarted.WithLabelValues(domain).Inc()
	s.m.InFlight.Inc()
	defer s.m.InFlight.Dec()
	tags := maps.Clone(s.cfg.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags["producer"] = "tau2-producer"
	start := time.Now()
	res := runner.Run(work, episode.Input{
		Task: task, Split: req.Split, ID: uuid.New(), RequestID: req.RequestID, Trial: trial,
		Seed: TrialSeed(req.RequestID, trial), PolicyVersion: s.d.Versions.Latest(), Sampling: req.Sampling, Tags: tags,
	})
	shaping.Apply(s.shape, res.Traj)
	s.observe(domain, res, time.Since(start))
	return res
}

func (s *Service) observe(domain string, res *episode.Result, d time.Duration) {
	tr := res.Traj
	s.m.EpisodesFinished.WithLabelValues(domain, string(tr.Status), tr.Termination).Inc()
	s.m.EpisodeSeconds.WithLabelValues(domain).Observe(d.Seconds())
	s.m.Steps.WithLabelValues(domain).Observe(float64(res.Stats.Steps))
	s.m.InvalidFormat.WithLabelValues(domain).Add(float64(tr.InvalidFormatTurns))
	s.m.ToolErrors.WithLabelValues(domain).Add(float64(res.Stats.ToolErrors))
	s.m.Tokens.WithLabelValues(domain, "prompt").Add(float64(res.Stats.PromptTokens))
	s.m.Tokens.WithLabelValues(domain, "completion").Add(float64(res.Stats.CompletionTokens))
	for _, l := range res.Stats.AgentLatencies {
		s.m.LLMLatency.WithLabelValues("agent").Observe(l.Seconds())
	}
	for _, l := range res.Stats.UserLatencies {
		s.m.LLMLatency.WithLabelValues("user").Observe(l.Seconds())
	}
	if res.Infra != nil {
		s.m.InfraErrors.WithLabelValues(domain, res.Infra.Stage).Inc()
	} else if tr.Status == schemas.StatusOK { // not_evaluated episodes have no reward to observe
		s.m.Reward.WithLabelValues(domain).Observe(tr.Reward)
		s.m.ShapedReward.WithLabelValues(domain).Observe(tr.ShapedReward)
	}
	s.count(func(sm *Summary) {
		sm.Episodes++
		if res.Infra != nil {
			sm.InfraErrors++
		}
	})
}

// publish writes a group's infrastructure errors and trajectories.
func (s *Service) publish(ctx context.Context, domain string, req schemas.RolloutRequest, results []*episode.Result) error {
	start := time.Now()
	var infra []schemas.Framed
	var trajs []*schemas.Trajectory
	for _, r := range results {
		if r.Infra != nil {
			partial := *r.Traj
			partial.Calls = nil // token arrays stay out of the operator-facing topic
			// The partial gets its own messages: the trajectory published below keeps its calls
			// and so its message→call links (sharing the slice unlinked every message of it).
			partial.Messages = append([]schemas.Message(nil), r.Traj.Messages...)
			for i := range partial.Messages {
				partial.Messages[i].CallIndex = -1
			}
			ie := schemas.InfraError{TaskID: req.TaskID, TrajectoryID: r.Traj.ID, RequestID: req.RequestID, Domain: domain,
				Stage: r.Infra.Stage, Error: r.Infra.Error(), Time: time.Now().UTC(), Partial: &partial}
			f, err := schemas.FrameControl(&ie)
			if err != nil {
				return fmt.Errorf("rollout: frame infra error: %w", err)
			}
			infra = append(infra, f)
			s.log.Warn("episode infrastructure error", "request", req.RequestID, "task", req.TaskID, "stage", r.Infra.Stage, "err", r.Infra.Err)
			if !s.cfg.PublishInfraTrajectories {
				continue
			}
		}
		trajs = append(trajs, r.Traj)
	}
	if len(infra) > 0 {
		if err := s.d.InfraErrors.PublishFramed(ctx, infra...); err != nil {
			return fmt.Errorf("rollout: publish infra errors of request %s: %w", req.RequestID, err)
		}
	}
	if len(trajs) > 0 {
		msgs, err := s.frame(trajs)
		if err != nil {
			return err
		}
		if err := s.d.Trajectories.PublishFramed(ctx, msgs...); err != nil {
			return fmt.Errorf("rollout: publish request %s: %w", req.RequestID, err)
		}
	}
	s.m.Publish.Observe(time.Since(start).Seconds())
	return nil
}

// frame packs a group into one message when it fits, else one per
// trajectory.
func (s *Service) frame(trajs []*schemas.Trajectory) ([]schemas.Framed, error) {
	f, err := schemas.FrameTrajectories(trajs...)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	if stream.MessageSize(stream.FromFramed(f)) <= s.d.MaxMessageBytes || len(trajs) == 1 {
		return []schemas.Framed{f}, nil
	}
	out := make([]schemas.Framed, 0, len(trajs))
	for _, t := range trajs {
		f, err := schemas.FrameTrajectories(t)
		if err != nil {
			return nil, fmt.Errorf("rollout: %w", err)
		}
		out = append(out, f)
	}
	return out, nil
}

// TrialSeed is a trial's seed in [0, 1_000_000] (τ²'s range), derived from
// the request id so a redelivered request replays the same seeds.
func TrialSeed(requestID string, trial int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", requestID, trial)
	return int64(h.Sum64() % 1_000_001)
}
