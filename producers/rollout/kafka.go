package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"tau2rl/lib/logs"
	"tau2rl/lib/stream"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
)

// KafkaIO are the Kafka clients of a producer.
type KafkaIO struct {
	Requests     *tkafka.GroupReader
	DeadLetters  *tkafka.DeadLetters
	Trajectories *tkafka.Writer
	InfraErrors  *tkafka.Writer
}

// OpenKafka creates the topics the producer uses (if absent) and opens its
// clients: the request reader in group (none when group is "": self-driven mode), dead letters, and the trajectory and
// infra-error writers. km may be nil.
func OpenKafka(ctx context.Context, kc tkafka.Config, group string, km *tkafka.Metrics) (*KafkaIO, error) {
	t := kc.Topics
	if t.RolloutRequests == "" || t.InfraErrors == "" || t.PolicyVersions == "" {
		return nil, errors.New("rollout: kafka topics rollout_requests, infra_errors and policy_versions must be named")
	}
	if err := tkafka.EnsureTopics(ctx, kc, t.RolloutRequests, t.Trajectories, t.InfraErrors, t.PolicyVersions, t.DeadLetters); err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	io := &KafkaIO{}
	var err error
	if io.Trajectories, err = tkafka.NewWriter(kc, t.Trajectories, km); err != nil {
		return nil, err
	}
	if io.InfraErrors, err = tkafka.NewWriter(kc, t.InfraErrors, km); err != nil {
		io.Close()
		return nil, err
	}
	if io.DeadLetters, err = tkafka.NewDeadLetters(kc, "producer", km); err != nil {
		io.Close()
		return nil, err
	}
	if group == "" {
		return io, nil // self-driven: requests are made in-process, the group is not joined
	}
	if io.Requests, err = tkafka.NewGroupReader(kc, group, []string{t.RolloutRequests}, km); err != nil {
		io.Close()
		return nil, err
	}
	return io, nil
}

// Deps fills the Kafka parts of the service's dependencies.
func (io *KafkaIO) Deps(d Deps, kc tkafka.Config) Deps {
	d.DeadLetters, d.Trajectories, d.InfraErrors = io.DeadLetters, io.Trajectories, io.InfraErrors
	if io.Requests != nil { // a nil *GroupReader must not become a non-nil Source
		d.Source = io.Requests
	}
	d.MaxMessageBytes = kc.MaxMessageBytes
	return d
}

// Close closes every client; the reader leaves the group, so uncommitted
// requests go to other members.
func (io *KafkaIO) Close() error {
	var errs []error
	if io.Requests != nil {
		errs = append(errs, io.Requests.Close())
	}
	if io.DeadLetters != nil {
		errs = append(errs, io.DeadLetters.Close())
	}
	if io.Trajectories != nil {
		errs = append(errs, io.Trajectories.Close())
	}
	if io.InfraErrors != nil {
		errs = append(errs, io.InfraErrors.Close())
	}
	return errors.Join(errs...)
}

// FollowVersions reads the compacted policy-versions topic from its start
// and raises vs for every announcement, until ctx ends. Every producer must
// see every version, so it reads every partition itself, without a consumer
// group (tkafka.TopicReader): the principal needs only READ on the topic,
// and nothing is left behind on the cluster when the process exits. The
// topic is compacted, so reading it from the start costs about one message
// per key before the reader is caught up and follows new versions.
// Undecodable messages are logged and skipped: this reader only learns
// versions, it never loses work.
func FollowVersions(ctx context.Context, kc tkafka.Config, vs *Versions, m *Metrics, km *tkafka.Metrics, log *slog.Logger) error {
	log = logs.OrDiscard(log)
	kc.Reader.StartOffset = "earliest"
	r, err := tkafka.NewTopicReader(ctx, kc, kc.Topics.PolicyVersions, km)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("rollout: policy versions: %w", err)
	}
	defer r.Close()
	for {
		msg, err := r.Fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("rollout: policy versions: %w", err)
		}
		var pv schemas.PolicyVersion
		if err := schemas.UnframeControl(msg.Value, stream.HeaderMap(msg), &pv); err != nil {
			log.Warn("skipping undecodable policy-version message", "partition", msg.Partition, "offset", msg.Offset, "err", err)
			continue
		}
		vs.Observe(pv.Version)
		if m != nil {
			m.PolicyVersion.Set(float64(vs.Latest()))
		}
		log.Info("policy version", "version", pv.Version, "latest", vs.Latest(), "checkpoint", pv.CheckpointPath)
	}
}
