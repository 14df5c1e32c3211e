package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	kafkago "github.com/segmentio/kafka-go"
)

// Admin runs the few cluster requests roles need besides producing and
// consuming: topic creation, partition lists, end offsets and a group's
// committed offsets. It shares the Config's TLS and SASL.
type Admin struct {
	c      *kafkago.Client
	conn   *connection
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
		conn:   conn,
		dialer: conn.dialer,
		cfg:    cfg,
	}, nil
}

// EnsureTopics creates every topic in cfg.Topics (or only the names given)
// that does not exist yet, with cfg.Partitions partitions, cfg.ReplicationFactor
// replicas and a max.message.bytes that fits cfg.MaxMessageBytes. The policy
// versions topic is created compacted. Topics that already exist are left
// as they are (their partition count is not changed), so it is idempotent.
//
// It looks the topics up first and asks the cluster to create only the
// missing ones, so on a locked-down cluster where an administrator created
// the topics a principal without CREATE permission starts normally (it needs
// only DESCRIBE, which READ and WRITE imply). When a topic is missing and the
// principal may not create it, the error is a *TopicAuthorizationError naming
// the topics and the ACL needed.
func EnsureTopics(ctx context.Context, cfg Config, topics ...string) error {
	a, err := NewAdmin(cfg)
	if err != nil {
		return err
	}
	err = a.EnsureTopics(ctx, topics...)
	if err != nil && ctx.Err() == nil {
		// A refused SASL login reads "Metadata: unexpected EOF" here: say what it was.
		if aerr := CheckAuth(ctx, cfg); aerr != nil {
			return aerr
		}
	}
	return err
}

// EnsureTopics is the package-level EnsureTopics on this Admin's cluster.
func (a *Admin) EnsureTopics(ctx context.Context, topics ...string) error {
	if len(topics) == 0 {
		topics = a.cfg.Topics.All()
	}
	topics = dedupe(topics)
	for _, t := range topics {
		if err := validTopicName(t); err != nil {
			return fmt.Errorf("kafka: ensure topics: %w", err)
		}
	}
	found, err := a.lookupTopics(ctx, topics)
	if err != nil {
		return err
	}
	toCreate, hidden, err := planTopics(topics, found)
	if err != nil || len(toCreate) == 0 {
		return err
	}
	req := &kafkago.CreateTopicsRequest{}
	for _, t := range toCreate {
		req.Topics = append(req.Topics, a.topicConfig(t))
	}
	resp, err := a.c.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("kafka: create topics %v: %w", toCreate, err)
	}
	var errs []error
	denied := &TopicAuthorizationError{Principal: saslPrincipal(a.cfg.SASL)}
	for _, t := range toCreate {
		e := resp.Errors[t]
		switch {
		case e == nil || errors.Is(e, kafkago.TopicAlreadyExists):
			// Created, or created by someone else since the lookup (or
			// it exists but this principal may not DESCRIBE it).
		case errors.Is(e, kafkago.TopicAuthorizationFailed) || errors.Is(e, kafkago.ClusterAuthorizationFailed):
			if hidden[t] {
				denied.Hidden = append(denied.Hidden, t)
			} else {
				denied.Missing = append(denied.Missing, t)
			}
			if denied.Err == nil {
				denied.Err = e
			}
		default:
			errs = append(errs, fmt.Errorf("kafka: create topic %s: %w", t, e))
		}
	}
	if denied.Err != nil {
		errs = append([]error{denied}, errs...)
	}
	return errors.Join(errs...)
}

// topicConfig is the creation request for topic t: the configured partitions,
// replication and message size, compacted for the policy-versions topic.
func (a *Admin) topicConfig(t string) kafkago.TopicConfig {
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
	return tc
}

// lookupTopics asks the cluster for the metadata of topics and returns each
// topic's error (nil when it exists and is visible).
func (a *Admin) lookupTopics(ctx context.Context, topics []string) (map[string]error, error) {
	md, err := a.metadata(ctx, topics)
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata of %v: %w", topics, err)
	}
	found := make(map[string]error, len(topics))
	for _, t := range md {
		found[t.Name] = t.Error
	}
	return found, nil
}

// metadata returns the cluster's metadata of topics. It uses a transport of
// its own whose first and only metadata request names exactly these topics,
// so the answer is current (kafka-go's Client otherwise answers from a
// cache that may predate a topic), and the request never asks the broker to
// create a missing topic automatically (which would bypass the settings
// EnsureTopics creates topics with).
func (a *Admin) metadata(ctx context.Context, topics []string) ([]kafkago.Topic, error) {
	tr := a.conn.newTransport()
	tr.MetadataTopics = topics
	defer tr.CloseIdleConnections()
	c := &kafkago.Client{Addr: a.c.Addr, Transport: tr, Timeout: a.c.Timeout}
	md, err := c.Metadata(ctx, &kafkago.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, err
	}
	return md.Topics, nil
}

// planTopics decides, from the metadata lookup of topics (each topic's error,
// nil when it exists; an absent entry counts as unknown), which topics to
// create. Unknown topics are created; topics the principal may not DESCRIBE
// are asked for too (marked hidden), since Kafka reports a missing topic and
// an invisible one alike and only a creation attempt tells them apart. Any
// other per-topic error (a leader election in progress, say) means the topic
// exists.
func planTopics(topics []string, found map[string]error) (toCreate []string, hidden map[string]bool, err error) {
	hidden = map[string]bool{}
	for _, t := range topics {
		e, ok := found[t]
		switch {
		case !ok || errors.Is(e, kafkago.UnknownTopicOrPartition):
			toCreate = append(toCreate, t)
		case errors.Is(e, kafkago.TopicAuthorizationFailed):
			toCreate = append(toCreate, t)
			hidden[t] = true
		case e == nil, errors.Is(e, kafkago.LeaderNotAvailable), errors.Is(e, kafkago.NotLeaderForPartition),
			errors.Is(e, kafkago.ReplicaNotAvailable):
		default:
			return nil, nil, fmt.Errorf("kafka: metadata of topic %s: %w", t, e)
		}
	}
	return toCreate, hidden, nil
}

// saslPrincipal is the principal Kafka's default principal builder gives a
// SASL user, or "" when the broker derives it from elsewhere.
func saslPrincipal(s SASLConfig) string {
	if s.Mechanism == "" || s.Mechanism == SASLNone || s.Username == "" {
		return ""
	}
	return "User:" + s.Username
}

// dedupe returns topics without repeated names, in first-seen order (a
// CreateTopics request naming a topic twice is rejected as a whole).
func dedupe(topics []string) []string {
	seen := make(map[string]bool, len(topics))
	out := make([]string, 0, len(topics))
	for _, t := range topics {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// TopicAuthorizationError is EnsureTopics' error when topics are missing and
// the principal may not create them: on a locked-down cluster an
// administrator creates the topics (docs/OPERATIONS.md, "Kafka: topics and
// principals") or grants CREATE. Error names the topics and the ACL.
type TopicAuthorizationError struct {
	// Principal is the Kafka principal as far as the client knows it
	// ("User:<sasl username>"), or "" when it is set by the broker (TLS
	// client certificates, no authentication).
	Principal string
	// Missing are topics the cluster reported as unknown.
	Missing []string
	// Hidden are topics the principal may not DESCRIBE, so whether they
	// exist is unknown to it; either way it cannot use them.
	Hidden []string
	// Err is the broker's error code, kafka-go's TopicAuthorizationFailed
	// or ClusterAuthorizationFailed.
	Err error
}

// Error explains what is missing and which ACL would fix it.
func (e *TopicAuthorizationError) Error() string {
	who := "this client's principal"
	flag := "User:<principal>"
	if e.Principal != "" {
		who, flag = "principal "+e.Principal, e.Principal
	}
	var b strings.Builder
	b.WriteString("kafka: ensure topics: ")
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, "topics %s do not exist and %s may not create them", strings.Join(e.Missing, ", "), who)
	}
	if len(e.Hidden) > 0 {
		if len(e.Missing) > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "topics %s are not visible to %s (no DESCRIBE permission, which READ or WRITE on the topic implies) and it may not create them",
			strings.Join(e.Hidden, ", "), who)
	}
	fmt.Fprintf(&b, " (%v). Create the topics ahead of time with an administrator's credentials (docs/OPERATIONS.md, \"Kafka: topics and principals\"), "+
		"or grant CREATE, e.g. kafka-acls.sh --add --allow-principal %s --operation Create", e.Err, flag)
	for _, t := range append(append([]string(nil), e.Missing...), e.Hidden...) {
		fmt.Fprintf(&b, " --topic %s", t)
	}
	if len(e.Hidden) > 0 {
		fmt.Fprintf(&b, "; and for topics the role reads or writes, grant READ or WRITE (kafka-acls.sh --add --allow-principal %s --operation Read|Write --topic …)", flag)
	}
	return b.String()
}

// Unwrap returns the broker's error, so errors.Is(err,
// kafkago.TopicAuthorizationFailed) holds.
func (e *TopicAuthorizationError) Unwrap() error { return e.Err }

// Partitions returns the partition ids of topic. Like EnsureTopics' lookup
// it asks the cluster afresh (kafka-go's Client answers metadata from a
// cache that misses topics created after it started) and never has a
// missing topic created automatically.
func (a *Admin) Partitions(ctx context.Context, topic string) ([]int, error) {
	md, err := a.metadata(ctx, []string{topic})
	if err != nil {
		return nil, fmt.Errorf("kafka: partitions of %s: %w", topic, err)
	}
	for _, t := range md {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("kafka: partitions of %s: %w", topic, t.Error)
		}
		ids := make([]int, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			ids = append(ids, p.ID)
		}
		if len(ids) == 0 {
			break
		}
		sort.Ints(ids)
		return ids, nil
	}
	return nil, fmt.Errorf("kafka: partitions of %s: %w", topic, kafkago.UnknownTopicOrPartition)
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
