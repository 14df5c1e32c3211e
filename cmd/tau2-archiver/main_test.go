package main

import (
	"testing"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/cmd/internal/clitest"
	"tau2rl/consumers/archiver"
	"tau2rl/consumers/release"
	tkafka "tau2rl/lib/stream/kafka"
)

// TestOverrides checks the keys tau2-run and the docs use.
func TestOverrides(t *testing.T) {
	cfg := Config{Kafka: tkafka.DefaultConfig(), Config: archiver.DefaultConfig()}
	_, err := cli.Parse([]string{"kafka.brokers=[127.0.0.1:1234]", "dataset_dir=/tmp/ds", "roll.max_age=5s",
		"parquet.zstd_level=default", "kafka.reader.session_timeout=10s"}, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Kafka.Brokers[0] != "127.0.0.1:1234" || cfg.DatasetDir != "/tmp/ds" || cfg.Roll.MaxAge != 5*time.Second ||
		cfg.Parquet.ZstdLevel != "default" || cfg.Kafka.Reader.SessionTimeout != 10*time.Second {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
	if cfg.Roll.MaxBytes != 128<<20 || cfg.Group != "archiver" {
		t.Fatalf("defaults lost: %+v", cfg.Config)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Parse([]string{"roll.max_agee=5s"}, &cfg); err == nil {
		t.Fatal("a misspelt key was accepted")
	}
	rc := release.DefaultConfig()
	if _, err := cli.Parse([]string{"source=/ds", "out=/rel", "filter.domains=[airline]", "filter.min_policy_version=3", "date_from=2026-11-01"}, &rc); err != nil {
		t.Fatal(err)
	}
	if rc.Filter.Domains[0] != "airline" || *rc.Filter.MinPolicyVersion != 3 || rc.Validate() != nil {
		t.Fatalf("release overrides not applied: %+v", rc)
	}
}

// TestConfigFiles: testdata/{config,release}/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	t.Run("archive", func(t *testing.T) {
		clitest.ConfigFiles(t, "testdata/config", func() any {
			return &Config{Kafka: tkafka.DefaultConfig(), Config: archiver.DefaultConfig()}
		})
	})
	t.Run("release", func(t *testing.T) {
		clitest.ConfigFiles(t, "testdata/release", func() any { c := release.DefaultConfig(); return &c })
	})
}
