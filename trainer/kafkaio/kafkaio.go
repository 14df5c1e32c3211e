// Package kafkaio connects the trainer loop (trainer/step) to Kafka through lib/stream/kafka:
// a Source over the scored-trajectories topic (consumer group "trainer") that dead-letters what
// it cannot decode, and a Publisher for rollout requests and policy versions.
package kafkaio

import (
	"context"
	"fmt"
	"log/slog"

	"tau2rl/lib/logs"
	"tau2rl/lib/stream"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
	"tau2rl/trainer/offsets"
	"tau2rl/trainer/step"
)

// DefaultGroup is the consumer group of the trainer.
const DefaultGroup = "trainer"

// Source reads trajectories for the trainer.
type Source struct {
	r  *tkafka.GroupReader
	dl *tkafka.DeadLetters
	// Log receives a warning for every dead-lettered message (the operator's only sign of it
	// besides the dead-letter counter); nil discards.
	Log *slog.Logger
}

var _ step.Source = (*Source)(nil)

// NewSource joins group on cfg.Topics.Trajectories. m may be nil.
func NewSource(cfg tkafka.Config, group string, m *tkafka.Metrics) (*Source, error) {
	r, err := tkafka.NewGroupReader(cfg, group, []string{cfg.Topics.Trajectories}, m)
	if err != nil {
		return nil, fmt.Errorf("trainer source: %w", err)
	}
	dl, err := tkafka.NewDeadLetters(cfg, group, m)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("trainer source: %w", err)
	}
	return &Source{r: r, dl: dl}, nil
}

// Next fetches the next message. A message that does not decode (bad framing, unknown schema
// version, invalid trajectory) is published to dead letters and returned without trajectories,
// so its offset still advances; if even the dead letter cannot be written, Next fails rather than
// lose it.
func (s *Source) Next(ctx context.Context) (step.Message, error) {
	msg, err := s.r.Fetch(ctx)
	if err != nil {
		return step.Message{}, err
	}
	out := step.Message{Topic: msg.Topic, Partition: msg.Partition, Offset: msg.Offset}
	trajs, derr := schemas.UnframeTrajectories(msg.Value, stream.HeaderMap(msg))
	if derr != nil {
		logs.OrDiscard(s.Log).Warn("dead-lettering message", "topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset,
			"key", string(msg.Key), "err", derr)
		if err := s.dl.DeadLetter(ctx, msg, derr); err != nil {
			return step.Message{}, fmt.Errorf("trainer source: %w", err)
		}
		return out, nil
	}
	out.Trajectories = trajs
	return out, nil
}

// Commit commits every target (the offset to resume from). Targets at 0 have nothing to commit.
func (s *Source) Commit(ctx context.Context, targets []offsets.Target) error {
	for _, t := range targets {
		if t.Next <= 0 {
			continue
		}
		if err := s.r.CommitOffset(ctx, t.Topic, t.Partition, t.Next); err != nil {
			return fmt.Errorf("trainer source: %w", err)
		}
	}
	return nil
}

// Close leaves the group and closes the dead-letter writer.
func (s *Source) Close() error {
	err := s.r.Close()
	if e := s.dl.Close(); err == nil {
		err = e
	}
	return err
}

// Publisher writes the trainer's control messages.
type Publisher struct {
	requests, versions *tkafka.Writer
}

var (
	_ step.RequestPublisher = (*Publisher)(nil)
	_ step.VersionPublisher = (*Publisher)(nil)
)

// NewPublisher opens writers for cfg.Topics.RolloutRequests and cfg.Topics.PolicyVersions. m
// may be nil.
func NewPublisher(cfg tkafka.Config, m *tkafka.Metrics) (*Publisher, error) {
	if cfg.Topics.RolloutRequests == "" || cfg.Topics.PolicyVersions == "" {
		return nil, fmt.Errorf("trainer publisher: topics.rollout_requests and topics.policy_versions must be named")
	}
	req, err := tkafka.NewWriter(cfg, cfg.Topics.RolloutRequests, m)
	if err != nil {
		return nil, fmt.Errorf("trainer publisher: %w", err)
	}
	ver, err := tkafka.NewWriter(cfg, cfg.Topics.PolicyVersions, m)
	if err != nil {
		req.Close()
		return nil, fmt.Errorf("trainer publisher: %w", err)
	}
	return &Publisher{requests: req, versions: ver}, nil
}

// PublishRequests writes rollout requests (key: task id) and waits for their acknowledgement.
func (p *Publisher) PublishRequests(ctx context.Context, reqs []schemas.RolloutRequest) error {
	framed := make([]schemas.Framed, len(reqs))
	for i := range reqs {
		f, err := schemas.FrameControl(&reqs[i])
		if err != nil {
			return fmt.Errorf("trainer publisher: %w", err)
		}
		framed[i] = f
	}
	return p.requests.PublishFramed(ctx, framed...)
}

// PublishVersion writes a policy version (key "policy" on the compacted topic).
func (p *Publisher) PublishVersion(ctx context.Context, v schemas.PolicyVersion) error {
	f, err := schemas.FrameControl(&v)
	if err != nil {
		return fmt.Errorf("trainer publisher: %w", err)
	}
	return p.versions.PublishFramed(ctx, f)
}

// Close closes both writers.
func (p *Publisher) Close() error {
	err := p.requests.Close()
	if e := p.versions.Close(); err == nil {
		err = e
	}
	return err
}
