// Command tau2-replay republishes archived trajectories from a Parquet dataset to the
// scored-trajectories Kafka topic, framed exactly as producers frame them, at a chosen rate.
package main

import (
	"context"
	"errors"
	"fmt"

	"tau2rl/cmd/internal/cli"
	"tau2rl/consumers/replay"
	"tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
)

// Config is the YAML configuration of tau2-replay.
type Config struct {
	// Kafka is the shared transport configuration.
	Kafka kafka.Config `yaml:"kafka"`
	// Topic overrides the destination topic (default: kafka.topics.trajectories).
	Topic string `yaml:"topic"`
	// Replay selects the dataset, filters and rate.
	Replay replay.Config `yaml:"replay"`
}

const usage = `tau2-replay reads trajectories from a Parquet dataset (directory, file or glob) and
publishes them, one Arrow IPC message per trajectory keyed by task id, to the scored-trajectories
topic, optionally filtered and rate-limited (token bucket; rate 0 = as fast as possible).

Examples:
  tau2-replay replay.dataset=/var/lib/tau2rl/archive replay.rate=50
  tau2-replay --config replay.yaml replay.filter.domains=[airline] replay.filter.min_policy_version=10`

func main() {
	cfg := Config{Kafka: kafka.DefaultConfig(), Replay: replay.DefaultConfig()}
	cli.Main(cli.App{Name: "tau2-replay", Usage: usage, MetricsAddr: ":9465"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return run(ctx, rt, &cfg)
	})
}

// Validate checks the whole configuration (cli calls it before run, so a bad value is exit
// status 2 before any connection).
func (c *Config) Validate() error {
	errs := []error{c.Kafka.Validate(), c.Replay.Validate()}
	if c.Topic != "" {
		k := c.Kafka
		k.Topics.Trajectories = c.Topic
		if err := k.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("topic: %w", err))
		}
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, rt *cli.Runtime, cfg *Config) error {
	if err := cfg.Validate(); err != nil {
		return cli.Usage(err)
	}
	topic := cfg.Topic
	if topic == "" {
		topic = cfg.Kafka.Topics.Trajectories
	}
	// No broker would otherwise surface after "ready", as a dial error of the first publish.
	if err := kafka.CheckBrokers(ctx, cfg.Kafka); err != nil {
		return err
	}
	// A wrong SASL password would otherwise surface as "unexpected EOF" or a silent retry loop.
	if err := kafka.CheckAuth(ctx, cfg.Kafka); err != nil {
		return err
	}
	km, err := kafka.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	w, err := kafka.NewWriter(cfg.Kafka, topic, km)
	if err != nil {
		return err
	}
	defer w.Close()
	m, err := replay.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	rt.Ready()
	pub := &batchPublisher{w: w}
	st, err := replay.Run(ctx, cfg.Replay, pub, m, rt.Log)
	if err != nil {
		return fmt.Errorf("after %d confirmed trajectories (%d unconfirmed): %w", st.Published, st.Unconfirmed, err)
	}
	return nil
}

// batchPublisher adapts lib/stream/kafka's Writer to replay.Publisher: Publish buffers, Flush
// sends the buffer in one acknowledged produce round trip (replay flushes every flush_every
// messages and before each rate-limit sleep).
type batchPublisher struct {
	w   *kafka.Writer
	buf []schemas.Framed
}

func (p *batchPublisher) Publish(_ context.Context, key string, value []byte, headers map[string]string) error {
	p.buf = append(p.buf, schemas.Framed{Key: key, Value: value, Headers: headers})
	return nil
}

func (p *batchPublisher) Flush(ctx context.Context) error {
	if len(p.buf) == 0 {
		return nil
	}
	err := p.w.PublishFramed(ctx, p.buf...)
	clear(p.buf)
	p.buf = p.buf[:0]
	return err
}
