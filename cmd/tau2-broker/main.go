// Command tau2-broker runs the embedded Kafka-protocol broker (franz-go's
// kfake, see lib/stream/embedded) as a standalone process on loopback,
// for development and `make run`.
//
// It is NOT a production broker: one process, no replication, no security,
// durability limited to its data directory. Production points every role's
// kafka.brokers at a real Kafka cluster instead.
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/lib/loopback"
	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
)

const usage = `tau2-broker — embedded Kafka-protocol broker for development (NOT for production)

Runs franz-go's kfake broker on a loopback address, with a data directory so
topics, messages and consumer-group offsets survive a restart, message.max.bytes
raised for multi-MB trajectories, and the pipeline's topics created with the
configured partition count. Point the roles at it with kafka.brokers=[ADDR].

This broker has no replication, no authentication and no hardening: use a real
Kafka cluster in production.

Examples:
  tau2-broker                                   # 127.0.0.1:9092, data in data/kafka
  tau2-broker addr=127.0.0.1:19092 data_dir=/tmp/kafka partitions=4`

// Config is tau2-broker's configuration.
type Config struct {
	// Addr is the listen address; the host must be a loopback address.
	// Default 127.0.0.1:9092.
	Addr string `yaml:"addr"`
	// DataDir persists the log and group offsets; "" keeps them in memory.
	// Default data/kafka.
	DataDir string `yaml:"data_dir"`
	// MaxMessageBytes is the largest client message to accept (the broker
	// adds framing headroom). Default 16 MiB.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// Partitions of created topics. Default 8.
	Partitions int `yaml:"partitions"`
	// SyncWrites fsyncs every produce batch. Default false.
	SyncWrites bool `yaml:"sync_writes"`
	// MinSessionTimeout is the smallest consumer session timeout accepted.
	// Default 0 (kfake's 6s).
	MinSessionTimeout time.Duration `yaml:"min_session_timeout"`
	// Topics are the pipeline topics created at start.
	Topics tkafka.Topics `yaml:"topics"`
}

func defaultConfig() Config {
	return Config{
		Addr: "127.0.0.1:9092", DataDir: "data/kafka",
		MaxMessageBytes: tkafka.DefaultMaxMessageBytes, Partitions: tkafka.DefaultPartitions,
		Topics: tkafka.DefaultConfig().Topics,
	}
}

func main() {
	cfg := defaultConfig()
	cli.Main(cli.App{Name: "tau2-broker", Usage: usage, MetricsAddr: "127.0.0.1:9400"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return run(ctx, rt, cfg)
	})
}

// Validate reports configuration errors before the broker starts (cli calls it: exit status 2).
func (c *Config) Validate() error {
	var errs []error
	if _, err := loopback.Port(c.Addr); err != nil {
		errs = append(errs, err)
	}
	if c.MaxMessageBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("max_message_bytes: %d is below 1 KiB", c.MaxMessageBytes))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d must be ≥ 1", c.Partitions))
	}
	if c.MinSessionTimeout < 0 {
		errs = append(errs, fmt.Errorf("min_session_timeout: %v must be ≥ 0", c.MinSessionTimeout))
	}
	kc := tkafka.DefaultConfig()
	kc.Topics, kc.Partitions, kc.MaxMessageBytes = c.Topics, max(c.Partitions, 1), max(c.MaxMessageBytes, 1<<10)
	if err := kc.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("tau2-broker: %w", errors.Join(errs...))
	}
	return nil
}

func run(ctx context.Context, rt *cli.Runtime, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	port, _ := loopback.Port(cfg.Addr)
	kc := tkafka.DefaultConfig()
	kc.Partitions = cfg.Partitions
	kc.MaxMessageBytes = cfg.MaxMessageBytes
	kc.Topics = cfg.Topics
	b, err := embedded.ForPipeline(ctx, embedded.Config{
		Port: port, DataDir: cfg.DataDir, SyncWrites: cfg.SyncWrites, MinSessionTimeout: cfg.MinSessionTimeout, Log: rt.Log,
	}, &kc)
	if err != nil {
		return fmt.Errorf("tau2-broker: %w", err)
	}
	defer b.Close()
	rt.Log.Warn("embedded development broker: not for production", "addr", b.Addr(), "data_dir", cfg.DataDir, "topics", cfg.Topics.All())
	rt.Ready()
	<-ctx.Done()
	rt.Log.Info("stopping broker (persisting state)")
	return nil
}
