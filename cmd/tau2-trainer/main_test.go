package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/backends"
	"tau2rl/gpu/dp"
	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
	"tau2rl/trainer/checkpoint"
	"tau2rl/trainer/trajtest"

	"tau2rl/cmd/internal/cli"
	"tau2rl/cmd/internal/clitest"
)

func execute(t *testing.T, ctx context.Context, args ...string) error {
	t.Helper()
	cfg := DefaultConfig()
	var out bytes.Buffer
	// The tests' tiny shape by default (their synthetic trajectories use 64 token ids); an
	// argument of the test's own overrides it.
	return cli.Execute(ctx, cli.App{Name: "tau2-trainer", Usage: usage}, append([]string{"--metrics-addr", "off", "--log-level", "warn", "model.config=" + tinyModel(t)}, args...), &cfg, &out,
		func(ctx context.Context, rt *cli.Runtime) error { return run(ctx, rt, &cfg) })
}

// TestTrainerBinary runs the main's wiring end to end on an embedded broker: two groups of
// synthetic trajectories make one step; the checkpoint appears and a second start resumes from it.
func TestTrainerBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded broker round trip")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := brokerWithTwoGroups(t, ctx, 2)

	dir := t.TempDir()
	args := []string{"kafka.brokers=[" + b.Addr() + "]", "kafka.reader.max_wait=50ms", "kafka.reader.heartbeat_interval=500ms",
		"kafka.reader.session_timeout=6s", "admission.enabled=false", "batch_size=2", "group.group_size=4", "max_steps=1",
		"checkpoint.dtype=float32", "checkpoint.dir=" + dir, "actor.mb_spec.max_tokens_per_mb=512", "tick=20ms"}
	if err := execute(t, ctx, args...); err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Manager{Dir: dir, Keep: 3}
	ck, st, ok, _, err := m.Latest()
	if err != nil || !ok || st.Version != 1 || st.Optimizer != checkpoint.OptimizerSaved {
		t.Fatalf("checkpoint %s %+v %v %v", ck, st, ok, err)
	}
	for _, f := range []string{"config.json", gpu.OptimizerStateFile} {
		if _, err := os.Stat(filepath.Join(ck, f)); err != nil {
			t.Fatal(err)
		}
	}
	// Resume: the trainer loads v1 and, with max_steps=1 already reached, stops at once.
	if err := execute(t, ctx, args...); err != nil {
		t.Fatal(err)
	}
	// A checkpoint that promises optimizer state it does not hold is refused, not resumed from
	// with a silently different optimizer.
	if err := os.Remove(filepath.Join(ck, gpu.OptimizerStateFile)); err != nil {
		t.Fatal(err)
	}
	if err := execute(t, ctx, args...); err == nil || !strings.Contains(err.Error(), "optimizer state") {
		t.Fatalf("resume without the promised optimizer state: err %v", err)
	}
}

// TestTrainerBinaryDataParallel: the same wiring with three in-process ranks (parallel.ranks):
// the checkpoint holds one optimizer shard per rank, a restart on two ranks resumes from it, and a
// restart without data parallelism refuses it with an error that says what to do.
func TestTrainerBinaryDataParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded broker round trip")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := brokerWithTwoGroups(t, ctx, 1)
	dir := t.TempDir()
	args := []string{"kafka.brokers=[" + b.Addr() + "]", "kafka.reader.max_wait=50ms", "kafka.reader.heartbeat_interval=500ms",
		"kafka.reader.session_timeout=6s", "admission.enabled=false", "batch_size=2", "group.group_size=4", "max_steps=1",
		"checkpoint.dir=" + dir, "actor.mb_spec.max_tokens_per_mb=40", "tick=20ms"}
	if err := execute(t, ctx, append(args, "parallel.ranks=3")...); err != nil {
		t.Fatal(err)
	}
	ck, st, ok, _, err := (&checkpoint.Manager{Dir: dir, Keep: 3}).Latest()
	if err != nil || !ok || st.Version != 1 || st.Optimizer != checkpoint.OptimizerSaved {
		t.Fatalf("checkpoint %s %+v %v %v", ck, st, ok, err)
	}
	for _, f := range []string{"config.json", dp.ShardFile(0, 3), dp.ShardFile(2, 3)} {
		if _, err := os.Stat(filepath.Join(ck, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := execute(t, ctx, append(args, "parallel.ranks=2", "parallel.shard_parameters=true")...); err != nil {
		t.Fatalf("resume on 2 ranks with sharded parameters: %v", err)
	}
	if err := execute(t, ctx, args...); err == nil || !strings.Contains(err.Error(), "sharded by a data-parallel trainer") {
		t.Fatalf("resume of sharded state on a plain backend: err %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backend=tpu", "admission.enabled=false"}, "want cpu or cuda"},
		{[]string{"batch_size=0"}, "batch_size"},
		{[]string{"no_such_key=1"}, "no_such_key"},
		{[]string{"parallel.devices=[0,1]", "admission.enabled=false"}, "parallel.devices is for backend cuda"},
		{[]string{"parallel.ranks=2", "parallel.hosts=2", "admission.enabled=false"}, "needs parallel.feed_addr"},
		// A valid multi-host config on a binary without the cuda backend: refused before any
		// connection, for the leader and for a follower alike.
		{[]string{"backend=cuda", "parallel.devices=[0]", "parallel.hosts=2", "parallel.feed_addr=127.0.0.1:1", "admission.enabled=false"}, "not available in this binary"},
		{[]string{"backend=cuda", "parallel.devices=[0]", "parallel.hosts=2", "parallel.host_rank=1", "parallel.feed_addr=127.0.0.1:1", "admission.enabled=false"}, "not available in this binary"},
		{[]string{"backend=cuda", "parallel.devices=[0,1]", "checkpoint.dtype=float32", "admission.enabled=false"}, "bfloat16"},
		{[]string{"parallel.shard_parameters=true", "admission.enabled=false"}, "needs parallel.devices or parallel.ranks"},
	} {
		if _, err := backends.Get("cuda"); err == nil && strings.Contains(c.want, "not available") {
			continue // a -tags cuda build has the backend
		}
		err := execute(t, ctx, append(c.args, "checkpoint.dir="+t.TempDir())...)
		if err == nil || !strings.Contains(err.Error(), c.want) || cli.ExitCode(err) != 2 {
			t.Errorf("%v: err %v (exit %d), want %q and exit 2", c.args, err, cli.ExitCode(err), c.want)
		}
	}
}

// TestConfigFiles: testdata/config/{good,bad} (see cmd/internal/clitest).
func TestConfigFiles(t *testing.T) {
	clitest.ConfigFiles(t, "testdata/config", func() any { c := DefaultConfig(); return &c })
}

// brokerWithTwoGroups starts an embedded broker with the topics on the given number of partitions
// and publishes two groups of four synthetic trajectories (tasks "0" and "1"): one step's batch.
func brokerWithTwoGroups(t *testing.T, ctx context.Context, partitions int) *embedded.Broker {
	t.Helper()
	kcfg := tkafka.DefaultConfig()
	kcfg.Partitions = partitions
	b, err := embedded.ForPipeline(ctx, embedded.Config{}, &kcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	w, err := tkafka.NewWriter(kcfg, kcfg.Topics.Trajectories, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, task := range []string{"0", "1"} {
		trajs, err := trajtest.Group(trajtest.Default(), task, uint64(i+1), trajtest.Rewards(4))
		if err != nil {
			t.Fatal(err)
		}
		f, err := schemas.FrameTrajectories(trajs...)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.PublishFramed(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	return b
}

// freeAddr is a loopback address with a port nothing listens on (just now).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestTrainerBinaryTwoHosts: the binary as two hosts of 2 cpu ranks each (parallel.hosts=2,
// host_rank 0 and 1; the follower reads no Kafka) takes the step one host with 4 ranks takes on
// the same data (loss, gradient norm, every weight), writes all 4 ranks' optimizer shards into
// the shared checkpoint directory, and both stop cleanly (the follower with success once the
// leader says goodbye). Restarted, both resume from that checkpoint (the follower told by the
// feed) and stop at once at max_steps.
func TestTrainerBinaryTwoHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("embedded broker round trip")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	model := tinyModel(t) // the hosts must agree on it, as on every other setting
	common := func(b *embedded.Broker, dir string) []string {
		return []string{"model.config=" + model, "kafka.brokers=[" + b.Addr() + "]", "kafka.reader.max_wait=50ms", "kafka.reader.heartbeat_interval=500ms",
			"kafka.reader.session_timeout=6s", "admission.enabled=false", "batch_size=2", "group.group_size=4", "max_steps=1",
			"checkpoint.dtype=float32", "checkpoint.dir=" + dir, "actor.mb_spec.max_tokens_per_mb=40", "tick=20ms"}
	}
	oneDir := t.TempDir()
	if err := execute(t, ctx, append(common(brokerWithTwoGroups(t, ctx, 1), oneDir), "parallel.ranks=4")...); err != nil {
		t.Fatal(err)
	}
	_, one, _, _, err := (&checkpoint.Manager{Dir: oneDir, Keep: 3}).Latest()
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	args := append(common(brokerWithTwoGroups(t, ctx, 1), dir), "parallel.ranks=2", "parallel.hosts=2", "parallel.feed_timeout=30s")
	twoHosts := func() {
		t.Helper()
		addr := "parallel.feed_addr=" + freeAddr(t)
		follower := make(chan error, 1)
		// slices.Concat: the two goroutines must not append into one backing array.
		go func() { follower <- execute(t, ctx, slices.Concat(args, []string{addr, "parallel.host_rank=1"})...) }()
		if err := execute(t, ctx, slices.Concat(args, []string{addr, "parallel.host_rank=0"})...); err != nil {
			t.Fatalf("leader: %v", err)
		}
		if err := <-follower; err != nil {
			t.Fatalf("follower: %v", err)
		}
	}
	twoHosts()
	ck, two, ok, _, err := (&checkpoint.Manager{Dir: dir, Keep: 3}).Latest()
	if err != nil || !ok || two.Version != 1 || two.Optimizer != checkpoint.OptimizerSaved {
		t.Fatalf("checkpoint %s %+v %v %v", ck, two, ok, err)
	}
	for r := range 4 {
		if _, err := os.Stat(filepath.Join(ck, dp.ShardFile(r, 4))); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"loss", "grad_norm", "entropy"} {
		if a, b := one.Metrics[k], two.Metrics[k]; math.Abs(a-b) > 1e-5*max(math.Abs(a), 1e-3) {
			t.Fatalf("%s: one host %v, two hosts %v", k, a, b)
		}
	}
	w1, err := gpu.LoadWeights(filepath.Join(oneDir, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	w2, err := gpu.LoadWeights(ck)
	if err != nil {
		t.Fatal(err)
	}
	for name, x := range w1.Tensors {
		for i, v := range x {
			if d := math.Abs(float64(v - w2.Tensors[name][i])); d > 2e-6 {
				t.Fatalf("%s[%d]: one host %v, two hosts %v", name, i, v, w2.Tensors[name][i])
			}
		}
	}
	// Resume on two hosts: the leader restores every host's optimizer state through the feed.
	twoHosts()
}

// TestTrainerUnreadableCheckpoints (issue 27 item 1): with checkpoint.keep=1 and the only
// checkpoint's trainer_state.json empty, the trainer used to start from random weights, publish
// version 1 after version 6 and prune each new checkpoint as soon as it was written. Now it
// refuses to start (exit status 1, naming the checkpoint and checkpoint.start_fresh) and touches
// nothing; with checkpoint.start_fresh=true it starts over, numbering on after v6, keeps its new
// checkpoint and leaves the unreadable one in place; the next start resumes from the new checkpoint without the setting.
func TestTrainerUnreadableCheckpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	// The model of this test, spelled out (model.config) so the test does not depend on defaults.
	modelConfig := filepath.Join(t.TempDir(), "config.json")
	cb, err := json.Marshal(gpu.TinyConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(modelConfig, cb, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &checkpoint.Manager{Dir: dir, Keep: 1}
	if _, err := m.Save(checkpoint.State{Version: 6, Step: 6}, func(d string) error {
		w, err := gpu.NewRandomWeights(gpu.TinyConfig(), 3)
		if err != nil {
			return err
		}
		return w.Save(d, gpu.F32)
	}); err != nil {
		t.Fatal(err)
	}
	v6 := filepath.Join(dir, "v6")
	if err := os.WriteFile(filepath.Join(v6, checkpoint.StateFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// No broker is needed to refuse: the checkpoint is read before any connection is made.
	base := []string{"kafka.brokers=[" + freeAddr(t) + "]", "admission.enabled=false", "batch_size=2", "group.group_size=4",
		"max_steps=1", "checkpoint.keep=1", "checkpoint.dtype=float32", "checkpoint.dir=" + dir, "model.config=" + modelConfig,
		"actor.mb_spec.max_tokens_per_mb=512", "tick=20ms"}
	err = execute(t, ctx, base...)
	if err == nil || cli.ExitCode(err) != 1 || !errors.Is(err, checkpoint.ErrNoReadable) {
		t.Fatalf("start over an unreadable checkpoint: err %v (exit %d), want a refusal with exit 1", err, cli.ExitCode(err))
	}
	for _, want := range []string{v6, checkpoint.StateFile, "checkpoint.start_fresh=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("a refused start changed checkpoint.dir: %v", ents)
	}

	if testing.Short() {
		t.Skip("embedded broker round trip")
	}
	b := brokerWithTwoGroups(t, ctx, 1)
	args := append(slices.Clone(base), "kafka.brokers=["+b.Addr()+"]", "kafka.reader.max_wait=50ms",
		"kafka.reader.heartbeat_interval=500ms", "kafka.reader.session_timeout=6s")
	// A fresh start numbers on after the unreadable v6 (producers drop requests below the highest
	// version they have seen): its one step (max_steps counts the steps of v6 too) writes v7. The
	// fixture's groups were sampled at version 0, within max_head_offpolicyness of 6 only so.
	if err := execute(t, ctx, append(slices.Clone(args), "checkpoint.start_fresh=true", "max_steps=7", "max_head_offpolicyness=6")...); err != nil {
		t.Fatalf("checkpoint.start_fresh=true: %v", err)
	}
	ck, st, ok, skipped, err := m.Latest()
	if err != nil || !ok || st.Version != 7 || filepath.Base(ck) != "v7" || len(skipped) != 0 {
		t.Fatalf("after a fresh start: latest %s %+v ok %v skipped %v err %v, want v7 kept beside the unreadable v6", ck, st, ok, skipped, err)
	}
	if _, err := os.Stat(v6); err != nil {
		t.Fatalf("the unreadable v6 was removed: %v", err)
	}
	// The next start resumes from v7 (max_steps reached: it stops at once), no setting needed.
	if err := execute(t, ctx, args...); err != nil {
		t.Fatalf("resume from v7 beside the unreadable v6: %v", err)
	}
}
