package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
)

// TestKcatInterop checks the transport against an independent client,
// librdkafka through Debian's kcat: kcat reads what our writer produced
// (zstd batches, keys, headers), and our group reader reads what kcat
// produced.
func TestKcatInterop(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("TAU2RL_REQUIRE_TOOLS") != "" {
			t.Fatal("kcat is not installed and TAU2RL_REQUIRE_TOOLS is set (CI): the librdkafka interop test must run (make deps DEPS_ARGS=--yes)")
		}
		t.Skip("kcat not installed (make deps installs it: Debian package kcat); skipping librdkafka interop test")
	}
	_, cfg := startBroker(t, embedded.DefaultConfig())
	ctx := testCtx(t, 60*time.Second)
	const n = 500
	fromGo, fromKcat := "interop.from_go", "interop.from_kcat"
	if err := tkafka.EnsureTopics(ctx, cfg, fromGo, fromKcat); err != nil {
		t.Fatal(err)
	}

	t.Run("kcat reads kafka-go zstd", func(t *testing.T) {
		w, err := tkafka.NewWriter(cfg, fromGo, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var msgs []tkafka.Message
		for i := 0; i < n; i++ {
			msgs = append(msgs, tkafka.Message{
				Key:     []byte(fmt.Sprintf("task-%02d", i%20)),
				Value:   []byte(fmt.Sprintf("value-%04d-%s", i, strings.Repeat("z", i%50))),
				Headers: []tkafka.Header{{Key: "schema-version", Value: []byte("1.0")}},
			})
		}
		if err := w.Write(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		out := runKcat(ctx, t, kcat, nil, "-C", "-b", cfg.Brokers[0], "-t", fromGo, "-o", "beginning", "-e", "-q",
			"-f", "%k|%s|%h\n")
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != n {
			t.Fatalf("kcat read %d messages, want %d", len(lines), n)
		}
		got := map[string]bool{}
		for _, l := range lines {
			parts := strings.Split(l, "|")
			if len(parts) != 3 || !strings.HasPrefix(parts[0], "task-") || parts[2] != "schema-version=1.0" {
				t.Fatalf("kcat line %q", l)
			}
			got[parts[1]] = true
		}
		for _, m := range msgs {
			if !got[string(m.Value)] {
				t.Fatalf("kcat missed %s", m.Value)
			}
		}
	})

	t.Run("kafka-go reads kcat zstd", func(t *testing.T) {
		var in bytes.Buffer
		for i := 0; i < n; i++ {
			fmt.Fprintf(&in, "key-%d\tkcat-%04d\n", i%7, i)
		}
		runKcat(ctx, t, kcat, &in, "-P", "-b", cfg.Brokers[0], "-t", fromKcat, "-K", "\t", "-z", "zstd")
		r, err := tkafka.NewGroupReader(cfg, "interop", []string{fromKcat}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		seen := map[string]bool{}
		for len(seen) < n {
			m, err := r.Fetch(ctx)
			if err != nil {
				t.Fatalf("after %d: %v", len(seen), err)
			}
			if !strings.HasPrefix(string(m.Key), "key-") || seen[string(m.Value)] {
				t.Fatalf("unexpected or duplicate message %q=%q", m.Key, m.Value)
			}
			seen[string(m.Value)] = true
			if err := r.Commit(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func runKcat(ctx context.Context, t *testing.T, kcat string, stdin *bytes.Buffer, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, kcat, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, stderr.String())
	}
	return out
}
