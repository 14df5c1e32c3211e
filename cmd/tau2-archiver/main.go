// Command tau2-archiver consumes scored trajectories from Kafka and writes the
// Parquet dataset (consumers/archiver); `tau2-archiver release` cuts a
// dataset for publication from it (consumers/release).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"tau2rl/cmd/internal/cli"
	"tau2rl/consumers/archiver"
	"tau2rl/consumers/release"
	tkafka "tau2rl/lib/stream/kafka"
)

const usage = `tau2-archiver — archive scored trajectories from Kafka into a Parquet dataset

Reads the trajectories topic as consumer group "archiver" and writes
dataset_dir/domain=<d>/date=<YYYY-MM-DD>/part-*.parquet (zstd). Files are
written under a temporary name, fsynced and renamed before their offsets are
committed; redelivered duplicates are dropped by trajectory id; messages that
cannot be archived go to the dead-letter topic.

Sub-commands:
  tau2-archiver [key=value ...]           archive (this help: tau2-archiver --help)
  tau2-archiver release [key=value ...]   cut a release (tau2-archiver release --help)

Examples:
  tau2-archiver kafka.brokers=[127.0.0.1:9092] dataset_dir=data/trajectories
  tau2-archiver roll.max_age=5s     # beside tau2-broker (127.0.0.1:9092): a local trial`

// Config is tau2-archiver's configuration: the Kafka transport plus the
// archiver settings at the top level.
type Config struct {
	Kafka           tkafka.Config `yaml:"kafka"`
	archiver.Config `yaml:",inline"`
}

// Validate checks the whole configuration (cli calls it before run, so a bad value is exit
// status 2 before any connection): the transport and the archiver settings.
func (c *Config) Validate() error {
	return errors.Join(c.Kafka.Validate(), c.Config.Validate())
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "release" {
		rc := release.DefaultConfig()
		cli.MainArgs(cli.App{Name: "tau2-archiver release", Usage: release.Usage, MetricsAddr: "off"}, os.Args[2:], &rc,
			func(ctx context.Context, rt *cli.Runtime) error {
				m, err := release.Cut(ctx, rc, rt.Log)
				if err != nil {
					return err
				}
				fmt.Printf("release %s: %d rows in %d files (%d duplicates dropped) → %s\n",
					m.Name, m.Rows, len(m.Files), m.DuplicatesDropped, rc.Out)
				return nil
			})
		return
	}
	cfg := Config{Kafka: tkafka.DefaultConfig(), Config: archiver.DefaultConfig()}
	cli.Main(cli.App{Name: "tau2-archiver", Usage: usage, MetricsAddr: ":9401"}, &cfg, func(ctx context.Context, rt *cli.Runtime) error {
		return run(ctx, rt, cfg)
	})
}

func run(ctx context.Context, rt *cli.Runtime, cfg Config) error {
	cfg.Kafka.Log = rt.Log
	// A wrong SASL password would otherwise surface as "unexpected EOF" or a silent retry loop.
	if err := tkafka.CheckAuth(ctx, cfg.Kafka); err != nil {
		return err
	}
	rt.Log.Info("archiver config", "kafka", cfg.Kafka)
	am, err := archiver.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	km, err := tkafka.NewMetrics(rt.Registry)
	if err != nil {
		return err
	}
	a, err := archiver.OpenKafka(ctx, cfg.Config, cfg.Kafka, archiver.Deps{Metrics: am, Log: rt.Log}, km)
	if err != nil {
		return err
	}
	// The group's lag over every partition of the topic (tau2rl_kafka_group_lag, the alerting
	// metric of a partial stall: docs/OPERATIONS.md, Tau2PartitionStalled) comes with the group
	// reader's metrics, km.
	rt.Ready()
	return a.Run(ctx)
}
