package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"tau2rl/cmd/internal/cli"
	"tau2rl/cmd/internal/clitest"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/scripted"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/tau2/tau2test"
)

// example returns the arguments of the --help example that follows the comment line containing
// marker (continuation lines joined), without the program name.
func example(t *testing.T, marker string) []string {
	t.Helper()
	lines := strings.Split(usage, "\n")
	for i, l := range lines {
		if !strings.Contains(l, marker) {
			continue
		}
		var cmd string
		for _, c := range lines[i+1:] {
			c = strings.TrimSpace(c)
			cont := strings.HasSuffix(c, "\\")
			cmd += " " + strings.TrimSuffix(strings.TrimSuffix(c, "`"), "\\")
			if !cont {
				break
			}
		}
		f := strings.Fields(cmd)
		if len(f) < 2 || f[0] != "tau2-producer" {
			t.Fatalf("example after %q is %q", marker, cmd)
		}
		return f[1:]
	}
	t.Fatalf("no example marked %q in the usage", marker)
	return nil
}

// TestLocalSmokeRunExample runs --help's "local smoke run" example as written — beside a broker
// (the one tau2-broker runs, in process here) and the scripted server as policy and user
// simulator, self-driven requests — only moving the broker from 127.0.0.1:9092 and the scripted
// server from 127.0.0.1:30000 to free ports. It must finish on its own with every episode
// published (it used to wait forever for requests nobody issued).
func TestLocalSmokeRunExample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 16 τ² episodes")
	}
	tau2test.DataDir(t)
	tk := tokenizertest.Qwen3(t)
	t.Setenv(tokenizer.EnvDir, tokenizertest.Dir(t))
	script, err := scripted.New(scripted.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer(tk, script)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kc := tkafka.DefaultConfig()
	broker, err := embedded.ForPipeline(ctx, embedded.Config{}, &kc)
	if err != nil {
		t.Fatal(err)
	}
	defer broker.Close()

	args := example(t, "local smoke run")
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "127.0.0.1:30000", host)
		args[i] = strings.ReplaceAll(args[i], "127.0.0.1:9092", broker.Addr())
	}
	cfg := DefaultConfig()
	var out bytes.Buffer
	stdout = &out
	defer func() { stdout = os.Stdout }()
	err = cli.Execute(ctx, cli.App{Name: "tau2-producer", Usage: usage}, append([]string{"--metrics-addr", "off", "--log-level", "warn"}, args...),
		&cfg, &out, func(ctx context.Context, rt *cli.Runtime) error { return run(ctx, &cfg, rt) })
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if ctx.Err() != nil {
		t.Fatal("the smoke run did not finish on its own")
	}
	if want := "4 requests, 16 episodes, 4 groups published, 0 infra errors"; !strings.Contains(out.String(), want) {
		t.Fatalf("summary %q, want %q", out.String(), want)
	}
}

func TestSelfDrivenUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"self_driven.enabled=true", "self_driven.trials=0"}, "self_driven.trials"},
		{[]string{"self_driven.enabled=true", "self_driven.limit=-1"}, "self_driven.limit"},
		{[]string{"self_driven.enabled=true", "self_driven.domain=../x"}, "self_driven.domain"},
	} {
		cfg := DefaultConfig()
		var out bytes.Buffer
		err := cli.Execute(context.Background(), cli.App{Name: "tau2-producer", Usage: usage},
			append([]string{"--metrics-addr", "off", "--log-level", "error"}, c.args...), &cfg, &out,
			func(ctx context.Context, rt *cli.Runtime) error { return run(ctx, &cfg, rt) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want %q", c.args, err, c.want)
		}
	}
}

// TestConfigFiles: testdata/config/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	clitest.ConfigFiles(t, "testdata/config", func() any { c := DefaultConfig(); return &c })
}
