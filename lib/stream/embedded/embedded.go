// Package embedded runs a Kafka-protocol broker in process, on loopback, for
// development (make run, tau2-broker) and tests; only tau2-broker, tau2-run and
// tests import it (importers_test.go), so no production binary can start one by
// configuration: they all talk to kafka.brokers. It is franz-go's kfake: a
// faithful single-process implementation of the Kafka wire protocol with
// consumer groups, compression, transactions and on-disk persistence, but no
// replication, no real durability guarantees beyond the local disk, and no
// security hardening. It is NOT a production broker; production points the
// roles at a real Kafka cluster.
//
// Settings that matter for this pipeline are set here, so every caller gets
// them: message.max.bytes raised to fit multi-MB trajectories, automatic
// topic creation (with the configured partition count), and an optional data
// directory so that the log and the committed group offsets survive a
// restart on the same directory.
//
// Known kfake limitation (pinned version) and its workaround: a consumer
// killed while its JoinGroup request is waiting for the rebalance stays in
// the group as a ghost member that keeps its partitions — the broker arms no
// session timer when the join response cannot be delivered, and the leader's
// SyncGroup clears the pending-sync timeout that would otherwise remove it.
// Its partitions would then not be consumed until the broker restarts (seen
// with kill -9 of a kafka-go consumer in 3 of 7 trials). The broker therefore
// runs an evictor (evict.go) as a safety net: it observes every group request
// and sends a LeaveGroup for a member that has sent nothing for longer than
// max(session timeout, rebalance timeout) plus a second, which is what a real
// broker's session timer does. evict_test.go kills a raw-protocol member
// mid-join and checks it leaves the group within that bound; in that
// in-process reproduction kfake's own (stale) session timer also removes the
// member, so the test does not reproduce the ghost itself. Real Kafka does
// not need the evictor; the group-lag alert (Tau2PartitionStalled) catches a
// stalled partition whatever the cause.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	tkafka "tau2rl/lib/stream/kafka"
)

// Config configures an embedded broker.
type Config struct {
	// Port is the loopback TCP port; 0 picks a free one. Default 0.
	Port int `yaml:"port"`
	// DataDir persists the log and group offsets across restarts; empty
	// keeps everything in memory. Default "".
	DataDir string `yaml:"data_dir"`
	// MaxMessageBytes is the client-side message limit to accommodate; the
	// broker's message.max.bytes is set with framing headroom above it.
	// Default kafka.DefaultMaxMessageBytes (16 MiB).
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// Partitions is the partition count of automatically created topics.
	// Default kafka.DefaultPartitions.
	Partitions int `yaml:"partitions"`
	// SyncWrites fsyncs every produce batch (slower, survives power loss).
	// Default false: data reaches disk on segment roll and clean shutdown,
	// like Kafka's default flush policy.
	SyncWrites bool `yaml:"sync_writes"`
	// Topics are created at start (if absent) with Partitions partitions.
	Topics []string `yaml:"topics"`
	// MinSessionTimeout lowers the smallest consumer-group session timeout
	// the broker accepts (kfake's default is 6s), so tests that kill a
	// consumer see its partitions reassigned quickly. Default 0: kfake's.
	MinSessionTimeout time.Duration `yaml:"min_session_timeout"`
	// Log receives the evictor's messages (a silent group member evicted); nil discards
	// (lib/logs). Not part of the YAML.
	Log *slog.Logger `yaml:"-"`
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{MaxMessageBytes: tkafka.DefaultMaxMessageBytes, Partitions: tkafka.DefaultPartitions}
}

// Broker is a running embedded broker.
type Broker struct {
	c    *kfake.Cluster
	addr string
	ev   *evictor
	once sync.Once
}

// Start starts a broker. It fails if the port is taken or the data
// directory cannot be used.
func Start(cfg Config) (*Broker, error) {
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = tkafka.DefaultMaxMessageBytes
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = tkafka.DefaultPartitions
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("embedded broker: port %d out of range", cfg.Port)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(cfg.Port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(cfg.Partitions),
		kfake.BrokerConfigs(map[string]string{
			"message.max.bytes": strconv.Itoa(tkafka.BrokerMessageMaxBytes(cfg.MaxMessageBytes)),
		}),
		kfake.ClusterID("tau2rl-embedded"),
	}
	if len(cfg.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(cfg.Partitions), cfg.Topics...))
	}
	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("embedded broker: data dir: %w", err)
		}
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if cfg.MinSessionTimeout > 0 {
		opts = append(opts, kfake.GroupMinSessionTimeout(cfg.MinSessionTimeout))
	}
	if cfg.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded broker: start on 127.0.0.1:%d: %w", cfg.Port, err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) == 0 {
		c.Close()
		return nil, errors.New("embedded broker: no listener")
	}
	ev := newEvictor(c, addrs[0], cfg.Log)
	go ev.run(evictInterval)
	return &Broker{c: c, addr: addrs[0], ev: ev}, nil
}

// evictInterval is how often the evictor looks for silent group members.
const evictInterval = 250 * time.Millisecond

// GroupMembers returns the member ids of group as the broker sees them (nil for an unknown
// group), for tests and diagnostics.
func (b *Broker) GroupMembers(group string) []string {
	info := b.c.GroupInfo(group)
	if info == nil {
		return nil
	}
	out := make([]string, len(info.Members))
	for i, m := range info.Members {
		out[i] = m.MemberID
	}
	return out
}

// Addr is the broker's host:port on loopback.
func (b *Broker) Addr() string { return b.addr }

// Port is the broker's TCP port, for restarting on the same address.
func (b *Broker) Port() int {
	_, p, err := net.SplitHostPort(b.addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// Close stops the broker, persisting its state when it has a data
// directory. It is safe to call more than once.
func (b *Broker) Close() {
	b.once.Do(func() {
		b.ev.close()
		b.c.Close()
	})
}

// ForPipeline starts a broker for the pipeline configuration kc and points kc.Brokers at it:
// the broker accepts kc's message size and creates topics with kc's partition count (those two
// fields of cfg are replaced), and kc's topics are created as EnsureTopics creates them (the
// policy-versions topic compacted) rather than left to automatic creation. The other settings
// (port, data directory, session timeout, fsync) come from cfg. tau2-broker starts its broker
// this way, and so do tests that run a binary's whole configuration against a broker of their
// own. The caller closes the broker.
func ForPipeline(ctx context.Context, cfg Config, kc *tkafka.Config) (*Broker, error) {
	cfg.MaxMessageBytes, cfg.Partitions = kc.MaxMessageBytes, kc.Partitions
	b, err := Start(cfg)
	if err != nil {
		return nil, err
	}
	kc.Brokers = []string{b.Addr()}
	if err := tkafka.EnsureTopics(ctx, *kc); err != nil {
		b.Close()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	return b, nil
}
