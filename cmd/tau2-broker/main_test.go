package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/cmd/internal/clitest"
	tkafka "tau2rl/lib/stream/kafka"
)

func TestBrokerServesAndCreatesTopics(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := defaultConfig()
	if _, err := cli.Parse([]string{"addr=" + addr, "data_dir=" + t.TempDir(), "partitions=3"}, &cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- run(ctx, &cli.Runtime{Log: quietLog(), Ready: func() { close(ready) }}, cfg)
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(20 * time.Second):
		t.Fatal("broker not ready")
	}
	kc := tkafka.DefaultConfig()
	kc.Brokers = []string{addr}
	admin, err := tkafka.NewAdmin(kc)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := admin.Partitions(context.Background(), kc.Topics.Trajectories)
	if err != nil || len(parts) != 3 {
		t.Fatalf("trajectories topic: %v partitions, %v", parts, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBrokerRefusesNonLoopback(t *testing.T) {
	cfg := defaultConfig()
	cfg.Addr = "0.0.0.0:9092"
	err := run(context.Background(), &cli.Runtime{Log: quietLog(), Ready: func() {}}, cfg)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("err = %v", err)
	}
}

// TestConfigFiles: testdata/config/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	clitest.ConfigFiles(t, "testdata/config", func() any { c := defaultConfig(); return &c })
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
