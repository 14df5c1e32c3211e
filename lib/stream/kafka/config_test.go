package kafka

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigValid(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if cfg.MaxMessageBytes != 16<<20 {
		t.Fatalf("max_message_bytes default = %d, want 16 MiB", cfg.MaxMessageBytes)
	}
	if got := cfg.Topics.All(); len(got) != 5 {
		t.Fatalf("topics.All() = %v, want 5 names", got)
	}
}

func TestConfigValidateRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "brokers"},
		{"broker without port", func(c *Config) { c.Brokers = []string{"localhost"} }, "host:port"},
		{"zero partitions", func(c *Config) { c.Partitions = 0 }, "partitions"},
		{"zero replication", func(c *Config) { c.ReplicationFactor = 0 }, "replication_factor"},
		{"tiny max message", func(c *Config) { c.MaxMessageBytes = 10 }, "max_message_bytes"},
		{"bad topic char", func(c *Config) { c.Topics.Trajectories = "a/b" }, "invalid topic name"},
		{"dot topic", func(c *Config) { c.Topics.DeadLetters = ".." }, "invalid topic name"},
		{"missing dead letters", func(c *Config) { c.Topics.DeadLetters = "" }, "dead_letters"},
		{"bad codec", func(c *Config) { c.Writer.Compression = "brotli" }, "writer.compression"},
		{"bad start offset", func(c *Config) { c.Reader.StartOffset = "middle" }, "start_offset"},
		{"heartbeat above session", func(c *Config) { c.Reader.HeartbeatInterval = time.Minute }, "heartbeat_interval"},
		{"unknown sasl", func(c *Config) { c.SASL.Mechanism = "GSSAPI" }, "sasl.mechanism"},
		{"sasl without user", func(c *Config) { c.SASL = SASLConfig{Mechanism: SASLPlain, PasswordEnv: "X"} }, "sasl.username"},
		{"sasl without password", func(c *Config) { c.SASL = SASLConfig{Mechanism: SASLScramSHA512, Username: "u"} }, "password_env"},
		{"cert without key", func(c *Config) { c.TLS.CertFile = "c.pem" }, "cert_file and key_file"},
		{"zero batch size", func(c *Config) { c.Writer.BatchSize = 0 }, "batch_size"},
		{"zero queue", func(c *Config) { c.Reader.QueueCapacity = 0 }, "queue_capacity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("Validate accepted an invalid config")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestSASLPasswordSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TAU2_TEST_KAFKA_PW", "from-env")
	cases := []struct {
		name    string
		s       SASLConfig
		want    string
		wantErr string
	}{
		{"env", SASLConfig{Mechanism: SASLPlain, Username: "u", PasswordEnv: "TAU2_TEST_KAFKA_PW"}, "from-env", ""},
		{"file trims newline", SASLConfig{Mechanism: SASLPlain, Username: "u", PasswordFile: file}, "from-file", ""},
		{"env wins over file", SASLConfig{Mechanism: SASLPlain, Username: "u", PasswordEnv: "TAU2_TEST_KAFKA_PW", PasswordFile: file}, "from-env", ""},
		{"unset env", SASLConfig{Mechanism: SASLPlain, Username: "u", PasswordEnv: "TAU2_TEST_KAFKA_UNSET"}, "", "not set"},
		{"missing file", SASLConfig{Mechanism: SASLPlain, Username: "u", PasswordFile: filepath.Join(dir, "nope")}, "", "read password file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.password()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("password() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestLogValueHasNoSecret(t *testing.T) {
	t.Setenv("TAU2_TEST_KAFKA_PW", "hunter2-secret")
	cfg := DefaultConfig()
	cfg.SASL = SASLConfig{Mechanism: SASLScramSHA256, Username: "svc", PasswordEnv: "TAU2_TEST_KAFKA_PW"}
	if _, err := cfg.SASL.mechanism(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "kafka", cfg)
	out := buf.String()
	if strings.Contains(out, "hunter2") {
		t.Fatalf("log line leaks the password: %s", out)
	}
	if !strings.Contains(out, "svc") || !strings.Contains(out, "SCRAM-SHA-256") {
		t.Fatalf("log line lacks the useful fields: %s", out)
	}
}

func TestMessageSizeBoundsKafkaGo(t *testing.T) {
	// MessageSize must never be below what kafka-go counts, or a message we
	// accept could still be rejected client-side.
	m := Message{Key: []byte("task-1"), Value: make([]byte, 1000), Headers: []Header{{Key: "k", Value: []byte("v")}}}
	kafkaGo := 4 + 1 + 1 + (4 + len(m.Key)) + (4 + len(m.Value)) + 8 + 1 + 1 + 1 + 1 + 1 // size() + varint header framing
	if got := MessageSize(m); got < kafkaGo {
		t.Fatalf("MessageSize = %d < kafka-go's %d", got, kafkaGo)
	}
}
