package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// Default sizes and timings. They are exported so that documentation and other
// packages (the embedded broker, the archiver) can refer to the same numbers.
const (
	// DefaultMaxMessageBytes is the largest Kafka message (key + value +
	// headers, uncompressed) a writer accepts: 16 MiB, enough for a
	// multi-MB trajectory. The broker's message.max.bytes must be at least
	// this plus batch overhead (see BrokerMessageMaxBytes).
	DefaultMaxMessageBytes = 16 << 20
	// DefaultPartitions is the partition count used when a topic is created.
	DefaultPartitions = 8
	// DefaultReplicationFactor is the replication used when a topic is
	// created; 1 suits the single embedded broker, production sets 3.
	DefaultReplicationFactor = 1
	// DefaultBatchTimeout bounds how long a writer waits to fill a batch.
	// kafka-go's own default (1 s) adds a second of latency to every
	// synchronous write; 10 ms keeps batching effective under load.
	DefaultBatchTimeout = 10 * time.Millisecond
	// DefaultBatchSize is the most messages a writer puts in one produce
	// request per partition.
	DefaultBatchSize = 1000
	// DefaultWriteTimeout bounds one produce round trip.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultMaxAttempts is how often a writer tries a batch before it
	// returns the error to the caller.
	DefaultMaxAttempts = 10
	// DefaultSessionTimeout is the consumer-group session timeout: how long
	// a crashed member holds its partitions before the group rebalances.
	DefaultSessionTimeout = 30 * time.Second
	// DefaultHeartbeatInterval is the consumer-group heartbeat period.
	DefaultHeartbeatInterval = 3 * time.Second
	// DefaultMaxWait bounds how long a fetch waits for data on the broker.
	DefaultMaxWait = 500 * time.Millisecond
	// DefaultDialTimeout bounds connection setup (TCP + TLS + SASL).
	DefaultDialTimeout = 10 * time.Second
)

// BrokerMessageMaxBytes is the broker (or topic) message.max.bytes that a
// client limit of maxMessageBytes needs: the record batch adds framing on top
// of the largest message, so the broker limit gets 64 KiB of headroom.
func BrokerMessageMaxBytes(maxMessageBytes int) int { return maxMessageBytes + 64<<10 }

// Config is the Kafka transport configuration shared by every role. It is
// loaded from YAML (plus key=value overrides) by the mains; DefaultConfig gives
// the documented defaults.
type Config struct {
	// Brokers are the bootstrap host:port addresses. Default ["127.0.0.1:9092"].
	Brokers []string `yaml:"brokers"`
	// ClientID names this process to the brokers (logs, quotas). Default "tau2rl".
	ClientID string `yaml:"client_id"`
	// SASL authentication; mechanism "none" (default) disables it.
	SASL SASLConfig `yaml:"sasl"`
	// TLS for broker connections; disabled by default.
	TLS TLSConfig `yaml:"tls"`
	// Topics names the topics of the pipeline.
	Topics Topics `yaml:"topics"`
	// Partitions is the partition count EnsureTopics creates topics with.
	// Default 8.
	Partitions int `yaml:"partitions"`
	// ReplicationFactor is the replication EnsureTopics creates topics
	// with. Default 1.
	ReplicationFactor int `yaml:"replication_factor"`
	// MaxMessageBytes is the largest message a writer accepts and the
	// topic-level max.message.bytes EnsureTopics sets (plus framing
	// headroom). Default 16 MiB.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// Writer tunes producers.
	Writer WriterConfig `yaml:"writer"`
	// Reader tunes consumer-group readers and TopicReaders.
	Reader ReaderConfig `yaml:"reader"`
	// DialTimeout bounds connection setup. Default 10s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// Log, when set, receives kafka-go's own messages: its informational
	// ones (group joins, assignments) at debug level and its errors (dial
	// failures, retries) at warn level. Not part of the YAML.
	Log *slog.Logger `yaml:"-"`
}

// Topics names every topic of the pipeline, so no role hard-codes a name.
type Topics struct {
	// Trajectories carries scored trajectories (Arrow IPC). Default "tau2.trajectories".
	Trajectories string `yaml:"trajectories"`
	// RolloutRequests carries admission-controlled rollout requests. Default "tau2.rollout_requests".
	RolloutRequests string `yaml:"rollout_requests"`
	// PolicyVersions is the compacted topic of published policy versions. Default "tau2.policy_versions".
	PolicyVersions string `yaml:"policy_versions"`
	// InfraErrors carries infrastructure failures (never rewards). Default "tau2.infra_errors".
	InfraErrors string `yaml:"infra_errors"`
	// DeadLetters carries messages no consumer could process. Default "tau2.dead_letters".
	DeadLetters string `yaml:"dead_letters"`
}

// All returns the configured topic names in a fixed order, skipping empty ones.
func (t Topics) All() []string {
	var out []string
	for _, n := range []string{t.Trajectories, t.RolloutRequests, t.PolicyVersions, t.InfraErrors, t.DeadLetters} {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

// WriterConfig tunes kafka-go writers. Acknowledgements are not configurable:
// every writer requires all in-sync replicas (kafka-go's default, acks=0,
// loses rejected messages silently).
type WriterConfig struct {
	// BatchTimeout bounds how long a partial batch waits. Default 10ms.
	BatchTimeout time.Duration `yaml:"batch_timeout"`
	// BatchSize is the most messages per batch. Default 1000.
	BatchSize int `yaml:"batch_size"`
	// WriteTimeout bounds one produce round trip. Default 30s.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// MaxAttempts is how many times a batch is tried. Default 10.
	MaxAttempts int `yaml:"max_attempts"`
	// Compression is the batch codec: zstd (default), lz4, snappy, gzip or
	// none. Trajectory values are uncompressed Arrow IPC, so the transport
	// compresses.
	Compression string `yaml:"compression"`
}

// ReaderConfig tunes consumer-group readers and TopicReaders.
type ReaderConfig struct {
	// StartOffset is where a group with no committed offset starts, and
	// where a TopicReader starts on every partition: "earliest" (default,
	// so an archiver never skips data) or "latest".
	StartOffset string `yaml:"start_offset"`
	// SessionTimeout is how long a dead member keeps its partitions. Default 30s.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// HeartbeatInterval is the group heartbeat period. Default 3s.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	// MaxWait bounds a broker-side fetch wait. Default 500ms.
	MaxWait time.Duration `yaml:"max_wait"`
	// QueueCapacity is how many fetched messages the reader buffers ahead
	// of the application. Default 100 (kafka-go's default); lower it to
	// bound memory when messages are large.
	QueueCapacity int `yaml:"queue_capacity"`
	// FetchMaxBytes is the most data one fetch asks a partition for. A
	// record batch larger than this is still returned whole (Kafka
	// returns at least one batch), so it bounds memory and per-fetch
	// copying without capping message size. Default 1 MiB (measured
	// fastest against the embedded broker with 100 KB trajectories).
	FetchMaxBytes int `yaml:"fetch_max_bytes"`
}

// SASL mechanisms accepted in SASLConfig.Mechanism.
const (
	SASLNone        = "none"
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLConfig configures SASL authentication. The password is never part of
// the YAML: it is read from an environment variable or a file at connect
// time, so config dumps and logs cannot leak it.
type SASLConfig struct {
	// Mechanism is none (default), PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `yaml:"mechanism"`
	// Username is the SASL user.
	Username string `yaml:"username"`
	// PasswordEnv names an environment variable holding the password.
	PasswordEnv string `yaml:"password_env"`
	// PasswordFile is a file holding the password (trailing newline
	// trimmed); used when PasswordEnv is empty.
	PasswordFile string `yaml:"password_file"`
}

// TLSConfig configures TLS to the brokers.
type TLSConfig struct {
	// Enabled turns TLS on. Default false.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of CAs to trust; empty uses the system pool.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and key for mutual
	// TLS; both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked against the broker certificate.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify disables certificate verification (testing only;
	// logged as a warning by the mains).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// DefaultConfig returns the documented defaults: one local broker, no auth,
// zstd, 16 MiB messages, 8 partitions, the tau2.* topic names.
func DefaultConfig() Config {
	return Config{
		Brokers:  []string{"127.0.0.1:9092"},
		ClientID: "tau2rl",
		SASL:     SASLConfig{Mechanism: SASLNone},
		Topics: Topics{
			Trajectories:    "tau2.trajectories",
			RolloutRequests: "tau2.rollout_requests",
			PolicyVersions:  "tau2.policy_versions",
			InfraErrors:     "tau2.infra_errors",
			DeadLetters:     "tau2.dead_letters",
		},
		Partitions:        DefaultPartitions,
		ReplicationFactor: DefaultReplicationFactor,
		MaxMessageBytes:   DefaultMaxMessageBytes,
		Writer: WriterConfig{
			BatchTimeout: DefaultBatchTimeout,
			BatchSize:    DefaultBatchSize,
			WriteTimeout: DefaultWriteTimeout,
			MaxAttempts:  DefaultMaxAttempts,
			Compression:  "zstd",
		},
		Reader: ReaderConfig{
			StartOffset:       "earliest",
			SessionTimeout:    DefaultSessionTimeout,
			HeartbeatInterval: DefaultHeartbeatInterval,
			MaxWait:           DefaultMaxWait,
			QueueCapacity:     100,
			FetchMaxBytes:     1 << 20,
		},
		DialTimeout: DefaultDialTimeout,
	}
}

// Validate reports the first configuration error, with the offending field
// named as it is spelled in YAML.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: at least one broker address is required"))
	}
	for _, b := range c.Brokers {
		if b == "" || !strings.Contains(b, ":") {
			errs = append(errs, fmt.Errorf("brokers: %q is not host:port", b))
		}
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d must be ≥ 1", c.Partitions))
	}
	if c.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("replication_factor: %d must be ≥ 1", c.ReplicationFactor))
	}
	if c.MaxMessageBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("max_message_bytes: %d is below 1 KiB", c.MaxMessageBytes))
	}
	if c.Topics.Trajectories == "" || c.Topics.DeadLetters == "" {
		errs = append(errs, errors.New("topics: trajectories and dead_letters must be named"))
	}
	for _, t := range c.Topics.All() {
		if err := validTopicName(t); err != nil {
			errs = append(errs, fmt.Errorf("topics: %w", err))
		}
	}
	if _, err := writerCodec(c.Writer.Compression); err != nil {
		errs = append(errs, fmt.Errorf("writer.compression: %w", err))
	}
	if c.Writer.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("writer.batch_size: %d must be ≥ 1", c.Writer.BatchSize))
	}
	if c.Writer.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("writer.max_attempts: %d must be ≥ 1", c.Writer.MaxAttempts))
	}
	if c.Writer.BatchTimeout <= 0 || c.Writer.WriteTimeout <= 0 {
		errs = append(errs, errors.New("writer.batch_timeout and writer.write_timeout must be positive"))
	}
	switch c.Reader.StartOffset {
	case "earliest", "latest":
	default:
		errs = append(errs, fmt.Errorf("reader.start_offset: %q is not earliest or latest", c.Reader.StartOffset))
	}
	if c.Reader.SessionTimeout <= 0 || c.Reader.HeartbeatInterval <= 0 || c.Reader.HeartbeatInterval >= c.Reader.SessionTimeout {
		errs = append(errs, errors.New("reader.heartbeat_interval must be positive and below reader.session_timeout"))
	}
	if c.Reader.MaxWait <= 0 {
		errs = append(errs, errors.New("reader.max_wait must be positive"))
	}
	if c.Reader.FetchMaxBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("reader.fetch_max_bytes: %d is below 1 KiB", c.Reader.FetchMaxBytes))
	}
	if c.Reader.QueueCapacity < 1 {
		errs = append(errs, fmt.Errorf("reader.queue_capacity: %d must be ≥ 1", c.Reader.QueueCapacity))
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, errors.New("dial_timeout must be positive"))
	}
	switch c.SASL.Mechanism {
	case "", SASLNone:
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASL.Username == "" {
			errs = append(errs, fmt.Errorf("sasl.username: required for %s", c.SASL.Mechanism))
		}
		if c.SASL.PasswordEnv == "" && c.SASL.PasswordFile == "" {
			errs = append(errs, fmt.Errorf("sasl: %s needs password_env or password_file", c.SASL.Mechanism))
		}
	default:
		errs = append(errs, fmt.Errorf("sasl.mechanism: %q is not none, PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASL.Mechanism))
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls: cert_file and key_file must be set together"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("kafka config: %w", errors.Join(errs...))
	}
	return nil
}

// validTopicName applies Kafka's topic name rule: 1–249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
func validTopicName(t string) error {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return fmt.Errorf("invalid topic name %q", t)
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("invalid topic name %q: character %q", t, r)
		}
	}
	return nil
}

// password resolves the SASL password from the environment or a file. It is
// called only when a connection is configured, never stored in Config.
func (s SASLConfig) password() (string, error) {
	if s.PasswordEnv != "" {
		p, ok := os.LookupEnv(s.PasswordEnv)
		if !ok {
			return "", fmt.Errorf("kafka sasl: environment variable %s is not set", s.PasswordEnv)
		}
		return p, nil
	}
	if s.PasswordFile != "" {
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("kafka sasl: read password file: %w", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", errors.New("kafka sasl: no password_env or password_file configured")
}

// LogValue renders the configuration for slog without secrets (the config
// holds only where the password lives, but this keeps future fields safe).
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("brokers", c.Brokers),
		slog.String("client_id", c.ClientID),
		slog.String("sasl", c.SASL.Mechanism),
		slog.String("sasl_user", c.SASL.Username),
		slog.Bool("tls", c.TLS.Enabled),
		slog.String("trajectories", c.Topics.Trajectories),
		slog.Int("max_message_bytes", c.MaxMessageBytes),
	)
}
