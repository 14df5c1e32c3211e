package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	kafkago "github.com/segmentio/kafka-go"
)

// Admin runs the few cluster requests roles need besides producing and
// consuming: topic creation, partition lists, end offsets and a group's
// committed offsets. It shares the Config's TLS and SASL.
type Admin struct {
	c      *kafkago.Client
	dialer *kafkago.Dialer
	cfg    Config
}

// NewAdmin returns an Admin for the cluster in cfg.
func NewAdmin(cfg Config) (*Admin, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	conn, err := newConnection(&cfg)
	if err != nil {
		return nil, err
	}
	return &Admin{
		c:      &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Transport: conn.transport, Timeout: cfg.DialTimeout * 3},
		dialer: conn.dialer,
		cfg:    cfg,
	}, nil
}

// EnsureTopics creates every topic in cfg.Topics (or only the names given)
// that does not exist yet, with cfg.Partitions partitions, cfg.ReplicationFactor
// replicas and a max.message.bytes that fits cfg.MaxMessageBytes. The policy
// versions topic is created compacted. Topics that already exist are left
// as they are (their partition count is not changed), so it is idempotent.
func EnsureTopics(ctx context.Context, cfg Config, topics ...string) error {
	a, err := NewAdmin(cfg)
	if err != nil {
		return err
	}
	return a.EnsureTopics(ctx, topics...)
}

// EnsureTopics is the package-level EnsureTopics on this Admin's cluster.
func (a *Admin) EnsureTopics(ctx context.Context, topics ...string) error {
	if len(topics) == 0 {
		topics = a.cfg.Topics.All()
	}
	req := &kafkago.CreateTopicsRequest{}
	for _, t := range topics {
		if err := validTopicName(t); err != nil {
			return fmt.Errorf("kafka: ensure topics: %w", err)
		}
		tc := kafkago.TopicConfig{
			Topic:             t,
			NumPartitions:     a.cfg.Partitions,
			ReplicationFactor: a.cfg.ReplicationFactor,
			ConfigEntries: []kafkago.ConfigEntry{
				{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(BrokerMessageMaxBytes(a.cfg.MaxMessageBytes))},
			},
		}
		if t == a.cfg.Topics.PolicyVersions {
			tc.ConfigEntries = append(tc.ConfigEntries, kafkago.ConfigEntry{ConfigName: "cleanup.policy", ConfigValue: "compact"})
		}
		req.Topics = append(req.Topics, tc)
	}
	resp, err := a.c.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("kafka: create topics %v: %w", topics, err)
	}
	var errs []error
	for _, t := range topics {
		if e := resp.Errors[t]; e != nil && !errors.Is(e, kafkago.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("kafka: create topic %s: %w", t, e))
		}
	}
	return errors.Join(errs...)
}

// Partitions returns the partition ids of topic. It asks a broker directly:
// kafka-go's Client answers metadata from a cache that misses topics created
// after it started.
func (a *Admin) Partitions(ctx context.Context, topic string) ([]int, error) {
	var lastErr error
	for _, b := range a.cfg.Brokers {
		conn, err := a.dialer.DialContext(ctx, "tcp", b)
		if err != nil {
			lastErr = err
			continue
		}
		parts, err := conn.ReadPartitions(topic)
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("kafka: partitions of %s: %w", topic, err)
		}
		ids := make([]int, 0, len(parts))
		for _, p := range parts {
			if p.Topic == topic {
				ids = append(ids, p.ID)
			}
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("kafka: partitions of %s: %w", topic, kafkago.UnknownTopicOrPartition)
		}
		sort.Ints(ids)
		return ids, nil
	}
	return nil, fmt.Errorf("kafka: partitions of %s: no broker reachable: %w", topic, lastErr)
}

// EndOffsets returns, per partition of topic, the offset the next produced
// message will get (the high watermark).
func (a *Admin) EndOffsets(ctx context.Context, topic string) (map[int]int64, error) {
	parts, err := a.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	reqs := make([]kafkago.OffsetRequest, len(parts))
	for i, p := range parts {
		reqs[i] = kafkago.LastOffsetOf(p)
	}
	resp, err := a.c.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("kafka: list offsets %s: %w", topic, err)
	}
	out := make(map[int]int64, len(parts))
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("kafka: list offsets %s/%d: %w", topic, po.Partition, po.Error)
		}
		out[po.Partition] = po.LastOffset
	}
	return out, nil
}

// CommittedOffsets returns, per partition of topic, the offset group will
// resume from; partitions without a commit are absent (all of them for a
// group the broker does not know).
func (a *Admin) CommittedOffsets(ctx context.Context, group, topic string) (map[int]int64, error) {
	parts, err := a.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	resp, err := a.c.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if errors.Is(err, kafkago.GroupIdNotFound) || (err == nil && errors.Is(resp.Error, kafkago.GroupIdNotFound)) {
		return map[int]int64{}, nil // a group that never committed
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: offset fetch %s/%s: %w", group, topic, err)
	}
	if resp.Error != nil {
		return nil, fmt.Errorf("kafka: offset fetch %s/%s: %w", group, topic, resp.Error)
	}
	out := make(map[int]int64)
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("kafka: offset fetch %s/%s/%d: %w", group, topic, p.Partition, p.Error)
		}
		if p.CommittedOffset >= 0 {
			out[p.Partition] = p.CommittedOffset
		}
	}
	return out, nil
}
