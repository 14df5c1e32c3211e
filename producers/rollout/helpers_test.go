package rollout_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"tau2rl/lib/uuid"
	"tau2rl/tau2/episode"
	"tau2rl/tau2/tau2test"

	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/scripted"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/producers/rollout"
	"tau2rl/schemas"
)

func qwen3(tb testing.TB) (*tokenizer.Tokenizer, string) {
	tb.Helper()
	return tokenizertest.Qwen3(tb), tokenizertest.Path(tb)
}

func needData(tb testing.TB) string { return tau2test.DataDir(tb) }

// broker starts an embedded Kafka broker and returns a config for it.
func broker(tb testing.TB) tkafka.Config {
	tb.Helper()
	kc := tkafka.DefaultConfig()
	kc.Partitions = 2
	kc.Reader.SessionTimeout = time.Second
	kc.Reader.HeartbeatInterval = 200 * time.Millisecond
	kc.Reader.MaxWait = 50 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := embedded.ForPipeline(ctx, embedded.Config{MinSessionTimeout: 200 * time.Millisecond}, &kc)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Close)
	return kc
}

// scriptedServer starts the scripted LLM server.
func scriptedServer(tb testing.TB, errorRate float64) *llmtest.Server {
	tb.Helper()
	tk, _ := qwen3(tb)
	needData(tb)
	cfg := scripted.DefaultConfig()
	cfg.ErrorRate = errorRate
	s, err := scripted.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := llmtest.NewServer(tk, s)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv
}

// producerConfig points a producer at an LLM server URL.
func producerConfig(tb testing.TB, url string) rollout.Config {
	tb.Helper()
	_, path := qwen3(tb)
	cfg := rollout.DefaultConfig()
	ep := llm.DefaultEndpointConfig()
	ep.BaseURL = url
	ep.MaxRetries = 1
	ep.BackoffBase, ep.BackoffMax = time.Millisecond, 5*time.Millisecond
	cfg.Policy.Endpoints = []episode.Endpoint{{EndpointConfig: ep}}
	cfg.Policy.Tokenizer = path
	cfg.Policy.Name = "scripted-policy"
	cfg.Econfig.UserLLMBaseURL = url + "/v1"
	cfg.Econfig.UserLLM = "scripted-user"
	cfg.UserEndpoint.MaxRetries = 1
	cfg.UserEndpoint.BackoffBase, cfg.UserEndpoint.BackoffMax = time.Millisecond, 5*time.Millisecond
	cfg.MaxConcurrentEpisodes = 16
	cfg.ShutdownGrace = 10 * time.Second
	return cfg
}

// startProducer opens a service on kc; the returned stop function closes
// its Kafka clients.
func startProducer(tb testing.TB, cfg rollout.Config, kc tkafka.Config, vs *rollout.Versions) (*rollout.Service, func()) {
	tb.Helper()
	if vs == nil {
		vs = &rollout.Versions{}
	}
	runners, err := episode.NewRunners(cfg.RunnerConfig, vs.Latest, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kio, err := rollout.OpenKafka(ctx, kc, cfg.ConsumerGroup, nil)
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := rollout.New(cfg, kio.Deps(rollout.Deps{Runners: runners, Versions: vs}, kc))
	if err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { kio.Close() }) }
	tb.Cleanup(stop)
	return svc, stop
}

// publishRequests writes rollout requests.
func publishRequests(tb testing.TB, kc tkafka.Config, reqs ...schemas.RolloutRequest) {
	tb.Helper()
	w, err := tkafka.NewWriter(kc, kc.Topics.RolloutRequests, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	var fs []schemas.Framed
	for i := range reqs {
		f, err := schemas.FrameControl(&reqs[i])
		if err != nil {
			tb.Fatal(err)
		}
		fs = append(fs, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.PublishFramed(ctx, fs...); err != nil {
		tb.Fatal(err)
	}
}

func request(domain, split, task string, n int, version int64) schemas.RolloutRequest {
	return schemas.RolloutRequest{RequestID: uuid.New(), TaskID: task, Domain: domain, Split: split, GroupSize: n,
		PolicyVersion: version, Sampling: schemas.SamplingParams{Temperature: 1, MaxTokens: 1024}, IssuedAt: time.Now().UTC()}
}

// drain reads every message of a topic (a fresh group from the start) until
// want messages arrived or the timeout passes.
func drain(tb testing.TB, kc tkafka.Config, topic string, want int, timeout time.Duration) []tkafka.Message {
	tb.Helper()
	r, err := tkafka.NewGroupReader(kc, "drain-"+uuid.New(), []string{topic}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []tkafka.Message
	for len(out) < want {
		m, err := r.Fetch(ctx)
		if err != nil {
			break
		}
		out = append(out, m)
	}
	return out
}

// committed returns the producers group's committed offsets summed over
// partitions, and the topic's end offsets summed.
func committed(tb testing.TB, kc tkafka.Config, group string) (int64, int64) {
	tb.Helper()
	a, err := tkafka.NewAdmin(kc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := a.CommittedOffsets(ctx, group, kc.Topics.RolloutRequests)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := a.EndOffsets(ctx, kc.Topics.RolloutRequests)
	if err != nil {
		tb.Fatal(err)
	}
	var sc, se int64
	for _, v := range c {
		sc += v
	}
	for _, v := range e {
		se += v
	}
	return sc, se
}
