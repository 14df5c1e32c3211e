package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/proc"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/schemas"
	"tau2rl/schemas/dataset"
	"tau2rl/tau2/data"
	"tau2rl/tau2/episode"
	"tau2rl/tau2/tau2test"
	"tau2rl/trainer/kafkaio"
)

// The mock domain's prompts are short, which keeps episodes and training
// steps of the pure-Go trainer fast; its tasks live in the "base" split.
const (
	testDomain = "mock"
	testSplit  = "base"
)

// shutdownEnv finds the τ² data and the Qwen3 tokenizer for the binaries
// (which run in a temporary directory and cannot find ../shared themselves).
func shutdownEnv(t *testing.T) (dataDir string, env []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the real binaries and sends them SIGTERM: skipped with -short")
	}
	dataDir = tau2test.DataDir(t)
	tok, err := tokenizer.LocateQwen3()
	if err != nil {
		t.Skipf("Qwen3 tokenizer not found (set %s or put it at ../shared/qwen3-tokenizer): %v", tokenizer.EnvDir, err)
	}
	return dataDir, []string{data.EnvVar + "=" + dataDir, tokenizer.EnvDir + "=" + tok}
}

// startHealthy starts s and waits for /healthz, stopping it at the end of the
// test if it still runs.
func startHealthy(t *testing.T, s *proc.Spec) *proc.Proc {
	t.Helper()
	p, err := proc.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	if err := p.WaitHealthy(context.Background(), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	return p
}

// stopClean sends SIGTERM and requires exit status 0 within grace.
func stopClean(t *testing.T, p *proc.Proc, grace time.Duration) {
	t.Helper()
	start := time.Now()
	if err := p.Stop(grace); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	t.Logf("%s exited 0 %.1fs after SIGTERM", p.Name, time.Since(start).Seconds())
}

// metric scrapes p and returns one family's sum over its series (0 before it has any).
func metric(p *proc.Proc, name string) (float64, error) {
	s, err := p.Scrape()
	return s[name], err
}

// metricWhere scrapes p and sums the series of one family whose label has value.
func metricWhere(p *proc.Proc, name, label, value string) (float64, error) {
	s, err := p.ScrapeWhere(label, value)
	return s[name], err
}

// waitFor polls cond every 100ms until it holds, fails, or timeout passes;
// what names the condition in the error.
func waitFor(timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("%s: not reached after %s (last error: %w)", what, timeout, last)
			}
			return fmt.Errorf("%s: not reached after %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kafkaArgs point a role at the test broker, with a short consumer-group
// session so a restarted member rejoins quickly.
func kafkaArgs(broker string) []string {
	return []string{"kafka.brokers=[" + broker + "]", "kafka.reader.session_timeout=6s", "kafka.reader.heartbeat_interval=1s"}
}

// groupDone reports whether group has committed every message of topic
// (committed offset = end offset on every partition), and the end total.
func groupDone(ctx context.Context, broker, group, topic string) (bool, int64, error) {
	ends, err := endOffsets(ctx, broker, topic)
	if err != nil {
		return false, 0, err
	}
	committed, err := committedOffsets(ctx, broker, group, topic, ends)
	if err != nil {
		return false, 0, err
	}
	var total int64
	done := true
	for p, end := range ends {
		total += end
		if committed[p] < end {
			done = false
		}
	}
	return done, total, nil
}

func partitions(broker, topic string) ([]int, error) {
	conn, err := kafkago.Dial("tcp", broker)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ps, err := conn.ReadPartitions(topic)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, p := range ps {
		out = append(out, p.ID)
	}
	sort.Ints(out)
	return out, nil
}

func endOffsets(ctx context.Context, broker, topic string) (map[int]int64, error) {
	parts, err := partitions(broker, topic)
	if err != nil {
		return nil, err
	}
	req := &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{}}
	for _, p := range parts {
		req.Topics[topic] = append(req.Topics[topic], kafkago.LastOffsetOf(p))
	}
	client := &kafkago.Client{Addr: kafkago.TCP(broker), Timeout: 10 * time.Second}
	resp, err := client.ListOffsets(ctx, req)
	if err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, po.Error
		}
		out[po.Partition] = po.LastOffset
	}
	return out, nil
}

func committedOffsets(ctx context.Context, broker, group, topic string, ends map[int]int64) (map[int]int64, error) {
	var parts []int
	for p := range ends {
		parts = append(parts, p)
	}
	client := &kafkago.Client{Addr: kafkago.TCP(broker), Timeout: 10 * time.Second}
	resp, err := client.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	out := map[int]int64{}
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, po.Error
		}
		out[po.Partition] = po.CommittedOffset // -1 when nothing committed
	}
	return out, nil
}

// publishedIDs reads every message of topic and returns how often each
// trajectory id was published, and the request ids the trajectories echo.
func publishedIDs(ctx context.Context, broker, topic string) (map[string]int, map[string]int, error) {
	ends, err := endOffsets(ctx, broker, topic)
	if err != nil {
		return nil, nil, err
	}
	ids, reqs := map[string]int{}, map[string]int{}
	for p, end := range ends {
		if end == 0 {
			continue
		}
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: p, MaxBytes: 64 << 20, MaxWait: 200 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				return nil, nil, fmt.Errorf("read %s/%d: %w", topic, p, err)
			}
			headers := map[string]string{}
			for _, h := range m.Headers {
				headers[h.Key] = string(h.Value)
			}
			trajs, err := schemas.UnframeTrajectories(m.Value, headers)
			if err != nil {
				r.Close()
				return nil, nil, fmt.Errorf("%s/%d@%d: %w", topic, p, m.Offset, err)
			}
			for _, tr := range trajs {
				ids[tr.ID]++
				reqs[tr.RequestID]++
			}
			if m.Offset >= end-1 {
				break
			}
		}
		r.Close()
	}
	return ids, reqs, nil
}

// TestGracefulShutdownPipeline runs the real broker, scripted LLM, producer
// and archiver; sends SIGTERM to the producer with episodes in flight and to
// the archiver mid-stream, restarts both, and requires that every rollout
// request was completed and that the Parquet dataset holds every trajectory
// published on the topic exactly once.
func TestGracefulShutdownPipeline(t *testing.T) {
	dataDir, env := shutdownEnv(t)
	needBinaries(t, "tau2-broker", "tau2-scripted-llm", "tau2-producer", "tau2-archiver")
	tasks, err := episode.LoadTasks(dataDir, testDomain, testSplit)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	brokerAddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	llmAddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	broker := startHealthy(t, &proc.Spec{Name: "broker", Bin: bins.Path("tau2-broker"), Dir: dir, Env: env,
		Args: []string{"addr=" + brokerAddr, "data_dir=" + filepath.Join(dir, "kafka"), "partitions=4"}})
	// 100 ms per LLM call: an episode takes a second or two, so a SIGTERM
	// finds episodes running, some of which finish within the grace and some not.
	startHealthy(t, &proc.Spec{Name: "scripted-llm", Bin: bins.Path("tau2-scripted-llm"), Dir: dir, Env: env,
		Args: []string{"addr=" + llmAddr, "domain=" + testDomain, "latency=100ms", "agent_error_rate=0.3"}})
	archiverSpec := &proc.Spec{Name: "archiver", Bin: bins.Path("tau2-archiver"), Dir: dir, Env: env,
		Args: append(kafkaArgs(brokerAddr), "dataset_dir="+filepath.Join(dir, "dataset"), "roll.max_age=1s")}
	// The first producer has no shutdown grace: its running groups are
	// handed back at SIGTERM. The second one may finish them (30s grace).
	producerSpec := func(grace string) *proc.Spec {
		return &proc.Spec{Name: "producer", Bin: bins.Path("tau2-producer"), Dir: dir, Env: env,
			Args: append(kafkaArgs(brokerAddr), "policy.endpoints=[http://"+llmAddr+"]", "user_llm_base_url=http://"+llmAddr+"/v1",
				"econfig.domain="+testDomain, "concurrency=6", "shutdown_grace="+grace)}
	}
	archiver := startHealthy(t, archiverSpec)
	producer := startHealthy(t, producerSpec("0s"))

	// Two rounds over the domain's tasks, three episodes each.
	kc := tkafka.DefaultConfig()
	kc.Brokers = []string{brokerAddr}
	pub, err := kafkaio.NewPublisher(kc, nil)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []schemas.RolloutRequest
	for round := 0; round < 2; round++ {
		for _, task := range tasks.Tasks {
			reqs = append(reqs, schemas.RolloutRequest{
				RequestID: fmt.Sprintf("deploytest-%d-%s", round, task.ID), TaskID: task.ID, Domain: testDomain, Split: testSplit,
				GroupSize: 3, Sampling: schemas.SamplingParams{Temperature: 1, TopP: 1, MaxTokens: 1024}, IssuedAt: time.Now().UTC(),
			})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := pub.PublishRequests(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	pub.Close()

	// SIGTERM the producer once it has published a group and has episodes
	// running: with no grace it hands them back; then again with a grace
	// long enough to finish them.
	logPath := filepath.Join(dir, "producer.log")
	for i, grace := range []string{"0s", "30s"} {
		if i > 0 {
			producer = startHealthy(t, producerSpec(grace))
		}
		before := strings.Count(readFile(t, logPath), "shutdown grace expired")
		err = waitFor(2*time.Minute, "producer publishing with episodes in flight", func() (bool, error) {
			published, err := metricWhere(producer, "tau2rl_producer_requests_total", "outcome", "published")
			if err != nil {
				return false, err
			}
			inFlight, err := metric(producer, "tau2rl_producer_episodes_in_flight")
			return published >= 1 && inFlight > 0, err
		})
		if err != nil {
			t.Fatalf("%v\n%s", err, producer.Tail(20))
		}
		stopClean(t, producer, 60*time.Second)
		expired := strings.Count(readFile(t, logPath), "shutdown grace expired") - before
		switch {
		case grace == "0s" && expired == 0:
			t.Errorf("with shutdown_grace=0s the producer did not hand back its running groups:\n%s", producer.Tail(10))
		case grace != "0s" && expired != 0:
			t.Errorf("with shutdown_grace=%s the producer did not finish its running groups:\n%s", grace, producer.Tail(10))
		}
	}
	producer = startHealthy(t, producerSpec("30s"))

	// SIGTERM the archiver after it has finalized a file, while the
	// producer keeps publishing.
	err = waitFor(2*time.Minute, "archiver finalized a file", func() (bool, error) {
		files, err := metric(archiver, "tau2rl_archiver_files_written_total")
		return files >= 1, err
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, archiver.Tail(20))
	}
	stopClean(t, archiver, 30*time.Second)
	archiver = startHealthy(t, archiverSpec)

	// Done when every request is committed by the producers and every
	// trajectory message by the archiver.
	err = waitFor(3*time.Minute, "all requests run and all trajectories archived", func() (bool, error) {
		reqDone, _, err := groupDone(ctx, brokerAddr, "producers", kc.Topics.RolloutRequests)
		if err != nil || !reqDone {
			return false, err
		}
		trajDone, n, err := groupDone(ctx, brokerAddr, "archiver", kc.Topics.Trajectories)
		return trajDone && n > 0, err
	})
	if err != nil {
		t.Fatalf("%v\nproducer:\n%s\narchiver:\n%s", err, producer.Tail(15), archiver.Tail(15))
	}
	stopClean(t, producer, 30*time.Second)
	stopClean(t, archiver, 30*time.Second)

	published, requests, err := publishedIDs(ctx, brokerAddr, kc.Topics.Trajectories)
	if err != nil {
		t.Fatal(err)
	}
	stopClean(t, broker, 30*time.Second)
	for _, r := range reqs {
		if requests[r.RequestID] < r.GroupSize {
			t.Errorf("request %s: %d trajectories published, want at least its group of %d", r.RequestID, requests[r.RequestID], r.GroupSize)
		}
	}

	ds, err := dataset.Open(filepath.Join(dir, "dataset"))
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := ds.ReadAll(context.Background(), dataset.Filter{IncludeInfraErrors: true})
	if err != nil {
		t.Fatal(err)
	}
	archived := map[string]int{}
	for _, r := range rows {
		archived[r.ID]++
	}
	for id, n := range archived {
		if n != 1 {
			t.Errorf("trajectory %s is %d times in the dataset", id, n)
		}
		if published[id] == 0 {
			t.Errorf("trajectory %s is in the dataset but was never published", id)
		}
	}
	for id := range published {
		if archived[id] == 0 {
			t.Errorf("trajectory %s was published but is not in the dataset", id)
		}
	}
	t.Logf("%d requests, %d trajectories published, %d rows archived", len(reqs), len(published), len(rows))
}

// TestTrainerGracefulShutdown runs the real trainer (pure-Go backend, a tiny
// Qwen3 shape with the real vocabulary) on episodes from the real producer;
// SIGTERM mid-run must make it finish its step, checkpoint it, commit the
// offsets it covers and exit 0, and a restart must resume from that
// checkpoint and keep training.
func TestTrainerGracefulShutdown(t *testing.T) {
	dataDir, env := shutdownEnv(t)
	needBinaries(t, "tau2-broker", "tau2-scripted-llm", "tau2-producer", "tau2-trainer")
	dir := t.TempDir()
	brokerAddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	llmAddr, err := proc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	broker := startHealthy(t, &proc.Spec{Name: "broker", Bin: bins.Path("tau2-broker"), Dir: dir, Env: env,
		Args: []string{"addr=" + brokerAddr, "data_dir=" + filepath.Join(dir, "kafka"), "partitions=4"}})
	startHealthy(t, &proc.Spec{Name: "scripted-llm", Bin: bins.Path("tau2-scripted-llm"), Dir: dir, Env: env,
		Args: []string{"addr=" + llmAddr, "domain=" + testDomain, "agent_error_rate=0.5"}})
	producer := startHealthy(t, &proc.Spec{Name: "producer", Bin: bins.Path("tau2-producer"), Dir: dir, Env: env,
		Args: append(kafkaArgs(brokerAddr), "policy.endpoints=[http://"+llmAddr+"]", "user_llm_base_url=http://"+llmAddr+"/v1",
			"econfig.domain="+testDomain, "concurrency=16")})
	ckpt := filepath.Join(dir, "checkpoints")
	// checkpoint.every is larger than the run, so the only checkpoints are
	// the ones SIGTERM causes.
	trainerSpec := &proc.Spec{Name: "trainer", Bin: bins.Path("tau2-trainer"), Dir: dir, Env: env,
		Args: append(kafkaArgs(brokerAddr), "checkpoint.dir="+ckpt, "checkpoint.every=1000",
			"batch_size=1", "group.group_size=2", "actor.advantage.drop_equal_rewards=false",
			"model.config="+repoPath("deploy/models/qwen3-tiny/config.json"), "data_dir="+dataDir,
			"admission.tasks=[{domain: "+testDomain+", split: "+testSplit+"}]", "admission.max_concurrent_rollouts=4",
			"reload.backend=sglang", "reload.endpoints=[{base_url: http://"+llmAddr+"}]")}
	trainer := startHealthy(t, trainerSpec)

	err = waitFor(4*time.Minute, "two training steps", func() (bool, error) {
		steps, err := metric(trainer, "tau2rl_trainer_steps_total")
		return steps >= 2, err
	})
	if err != nil {
		t.Fatalf("%v\ntrainer:\n%s\nproducer:\n%s", err, trainer.Tail(20), producer.Tail(10))
	}
	stopClean(t, trainer, 4*time.Minute)
	first := latestCheckpoint(t, ckpt)
	if first.Step < 2 || first.Version != first.Step {
		t.Fatalf("checkpoint after SIGTERM: step %d version %d, want the ≥ 2 steps taken", first.Step, first.Version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := endOffsets(ctx, brokerAddr, "tau2.trajectories")
	if err != nil {
		t.Fatal(err)
	}
	committed, err := committedOffsets(ctx, brokerAddr, "trainer", "tau2.trajectories", ends)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, o := range committed {
		if o > 0 {
			sum += o
		}
	}
	if sum == 0 {
		t.Errorf("the trainer committed no offsets with its SIGTERM checkpoint (committed %v)", committed)
	}

	trainer = startHealthy(t, trainerSpec)
	if v, err := metric(trainer, "tau2rl_trainer_policy_version"); err != nil || v != float64(first.Version) {
		t.Errorf("after restart the policy version is %v (%v), want the checkpoint's %d", v, err, first.Version)
	}
	if log := readFile(t, filepath.Join(dir, "trainer.log")); !regexp.MustCompile(`msg=resuming .*version=` + strconv.FormatInt(first.Version, 10) + `\b`).MatchString(log) {
		t.Errorf("the restarted trainer did not log resuming from version %d:\n%s", first.Version, trainer.Tail(10))
	}
	err = waitFor(4*time.Minute, "a step after the restart", func() (bool, error) {
		steps, err := metric(trainer, "tau2rl_trainer_steps_total")
		return steps >= 1, err
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, trainer.Tail(20))
	}
	stopClean(t, trainer, 4*time.Minute)
	second := latestCheckpoint(t, ckpt)
	if second.Step <= first.Step {
		t.Errorf("second checkpoint at step %d, want beyond the first's %d", second.Step, first.Step)
	}
	stopClean(t, producer, 30*time.Second)
	stopClean(t, broker, 30*time.Second)
}

// trainerState is the part of checkpoints/v<N>/trainer_state.json this test reads.
type trainerState struct {
	Version int64 `json:"version"`
	Step    int64 `json:"step"`
}

// latestCheckpoint returns the state of the highest complete v<N> in dir
// (temporary directories are ignored, as the trainer ignores them).
func latestCheckpoint(t *testing.T, dir string) trainerState {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("no checkpoint directory: %v", err)
	}
	best := int64(-1)
	for _, e := range entries {
		if n, err := strconv.ParseInt(strings.TrimPrefix(e.Name(), "v"), 10, 64); err == nil && strings.HasPrefix(e.Name(), "v") && n > best {
			best = n
		}
	}
	if best < 0 {
		t.Fatalf("no checkpoint v<N> in %s", dir)
	}
	var st trainerState
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "v"+strconv.FormatInt(best, 10), "trainer_state.json"))), &st); err != nil {
		t.Fatalf("v%d/trainer_state.json: %v", best, err)
	}
	if st.Version != best {
		t.Fatalf("v%d/trainer_state.json says version %d", best, st.Version)
	}
	return st
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
