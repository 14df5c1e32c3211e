package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/tokenizer"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"tau2rl/lib/stream"
	"tau2rl/lib/stream/embedded"
	tkafka "tau2rl/lib/stream/kafka"
	"tau2rl/lib/uuid"
	"tau2rl/producers/proxy"
	"tau2rl/producers/rollout"
	"tau2rl/schemas"
)

// broker starts an embedded Kafka broker (kfake on loopback) with the
// proxy's topics.
func broker(tb testing.TB) tkafka.Config {
	tb.Helper()
	kc := tkafka.DefaultConfig()
	kc.Partitions = 1
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

// received records what the scripted policy server was sent.
type received struct {
	mu      sync.Mutex
	prompts [][]int32
	max     []int
}

func (r *received) add(c *llmtest.Call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prompts = append(r.prompts, slices.Clone(c.PromptIDs))
	r.max = append(r.max, c.MaxTokens)
}

func (r *received) all() [][]int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.prompts)
}

// harness is a proxy on loopback in front of the scripted policy server
// (SGLang's /generate, token mode), publishing to an embedded broker.
type harness struct {
	tok  *tokenizer.Tokenizer
	llm  *llmtest.Server
	kc   tkafka.Config
	srv  *proxy.Server
	url  string // proxy root
	got  *received
	reg  *prometheus.Registry // the proxy's metrics
	stop func()
}

type harnessOpt func(*proxy.Config)

func newHarness(tb testing.TB, script llmtest.Script, opts ...harnessOpt) *harness {
	tb.Helper()
	return newHarnessWrap(tb, script, nil, opts...)
}

// newHarnessWrap is newHarness with the trajectory publisher wrapped (to
// inject publish failures in front of the real Kafka writer).
func newHarnessWrap(tb testing.TB, script llmtest.Script, wrap func(rollout.Publisher) rollout.Publisher, opts ...harnessOpt) *harness {
	tb.Helper()
	tok := tokenizertest.Qwen3(tb)
	h := &harness{tok: tok, got: &received{}}
	var err error
	h.llm, err = llmtest.NewServer(tok, llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		h.got.add(c)
		return script.Reply(ctx, c)
	}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.llm.Close() })
	h.kc = broker(tb)
	cfg := proxy.DefaultConfig()
	cfg.Auth = proxy.AuthConfig{Disabled: true}
	ep := llm.DefaultEndpointConfig()
	ep.BaseURL = h.llm.URL
	ep.MaxRetries = 1
	ep.BackoffBase, ep.BackoffMax = time.Millisecond, 5*time.Millisecond
	cfg.Policy.Endpoints = []llm.EndpointConfig{ep}
	cfg.ShutdownGrace = 5 * time.Second
	for _, o := range opts {
		o(&cfg)
	}
	pol, _, err := llm.NewPolicy(cfg.Policy, nil)
	if err != nil {
		tb.Fatal(err)
	}
	trajs, err := tkafka.NewWriter(h.kc, h.kc.Topics.Trajectories, nil)
	if err != nil {
		tb.Fatal(err)
	}
	infra, err := tkafka.NewWriter(h.kc, h.kc.Topics.InfraErrors, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var keys map[string]bool
	if !cfg.Auth.Disabled {
		if keys, err = cfg.Auth.LoadAPIKeys(); err != nil {
			tb.Fatal(err)
		}
	}
	var tp rollout.Publisher = trajs
	if wrap != nil {
		tp = wrap(trajs)
	}
	h.reg = prometheus.NewRegistry()
	pm, err := proxy.NewMetrics(h.reg)
	if err != nil {
		tb.Fatal(err)
	}
	h.srv, err = proxy.New(cfg, proxy.Deps{Policy: pol, Tokenizer: tok, Trajectories: tp, InfraErrors: infra, APIKeys: keys,
		Metrics: pm})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	h.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.srv.Serve(ctx, ln) }()
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("proxy serve: %v", err)
			}
			trajs.Close()
			infra.Close()
		})
	}
	tb.Cleanup(h.stop)
	return h
}

// do sends a JSON request to the proxy and decodes the JSON answer.
func (h *harness) do(tb testing.TB, method, path, token string, body any) (int, map[string]any) {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				tb.Fatal(err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		tb.Fatalf("%s %s: answer is not a JSON object (%d): %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// chat posts a chat request for session sid.
func (h *harness) chat(tb testing.TB, sid string, req map[string]any) (int, map[string]any) {
	tb.Helper()
	if _, ok := req["model"]; !ok {
		req["model"] = "qwen3-policy"
	}
	return h.do(tb, http.MethodPost, "/v1/chat/completions", "sk-unused;session="+sid, req)
}

// finish rewards and finishes a session.
func (h *harness) finish(tb testing.TB, sid string, reward float64) map[string]any {
	tb.Helper()
	code, out := h.do(tb, http.MethodPost, "/v1/sessions/"+sid+"/finish", "sk-test", map[string]any{"reward": reward})
	if code != http.StatusOK {
		tb.Fatalf("finish %s: %d %v", sid, code, out)
	}
	return out
}

// trajectories reads every trajectory published (a fresh group from the
// start), waiting until want arrived or the timeout passes.
func trajectories(tb testing.TB, kc tkafka.Config, want int, timeout time.Duration) []*schemas.Trajectory {
	tb.Helper()
	var out []*schemas.Trajectory
	for _, m := range drain(tb, kc, kc.Topics.Trajectories, want, timeout) {
		ts, err := schemas.UnframeTrajectories(m.Value, stream.HeaderMap(m))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, ts...)
	}
	return out
}

// infraErrors reads the infra-errors topic.
func infraErrors(tb testing.TB, kc tkafka.Config, want int, timeout time.Duration) []schemas.InfraError {
	tb.Helper()
	var out []schemas.InfraError
	for _, m := range drain(tb, kc, kc.Topics.InfraErrors, want, timeout) {
		var ie schemas.InfraError
		if err := schemas.UnframeControl(m.Value, stream.HeaderMap(m), &ie); err != nil {
			tb.Fatal(err)
		}
		out = append(out, ie)
	}
	return out
}

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
			if !errors.Is(err, context.DeadlineExceeded) {
				tb.Fatal(err)
			}
			break
		}
		out = append(out, m)
	}
	return out
}

// archive writes trajectories with the archiver's Parquet writer and reads
// the rows back, as the dataset reader does.
func archive(tb testing.TB, trajs []*schemas.Trajectory) []*schemas.Trajectory {
	tb.Helper()
	var buf bytes.Buffer
	w, err := schemas.NewParquetWriter(&buf, schemas.DefaultParquetWriterOptions())
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Write(trajs); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		tb.Fatal(err)
	}
	if err := schemas.CheckParquetFile(pf); err != nil {
		tb.Fatal(err)
	}
	rd := parquet.NewGenericReader[schemas.ParquetRow](pf)
	defer rd.Close()
	rows := make([]schemas.ParquetRow, len(trajs))
	n, err := rd.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) {
		tb.Fatal(err)
	}
	var out []*schemas.Trajectory
	for i := range n {
		t, err := schemas.FromParquetRow(&rows[i])
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, t)
	}
	return out
}

// checkTokenExact checks a trajectory against what the policy server
// received: every call's prompt, rebuilt from the stored suffixes, equals
// the prompt sent, in order; every completion carries the server's
// log-probs; and, but for drift, each prompt extends the previous call's
// prompt and completion.
func checkTokenExact(tb testing.TB, tok *tokenizer.Tokenizer, t *schemas.Trajectory, sent [][]int32, drift map[int]bool) {
	tb.Helper()
	prompts, err := t.FullPrompts()
	if err != nil {
		tb.Fatal(err)
	}
	if len(prompts) != len(sent) {
		tb.Fatalf("%d calls recorded, the policy server received %d", len(prompts), len(sent))
	}
	imEnd, _ := tok.AddedTokenID(chattemplate.IMEnd)
	for i := range prompts {
		if !slices.Equal(prompts[i], sent[i]) {
			a, _ := tok.Decode(prompts[i])
			b, _ := tok.Decode(sent[i])
			tb.Fatalf("call %d: rebuilt prompt (%d tokens) differs from the one sent (%d):\n%q\nvs\n%q", i, len(prompts[i]), len(sent[i]), a, b)
		}
		c := &t.Calls[i]
		for k, id := range c.CompletionTokens {
			if want := llmtest.Logprob(len(sent[i]), k, id); c.BehaviorLogprobs[k] != want {
				tb.Fatalf("call %d token %d: log-prob %v, the server gave %v", i, k, c.BehaviorLogprobs[k], want)
			}
		}
		if i == 0 || drift[i] {
			continue
		}
		prev := append(slices.Clone(prompts[i-1]), t.Calls[i-1].CompletionTokens...)
		if prev[len(prev)-1] != imEnd {
			prev = append(prev, imEnd)
		}
		if len(prompts[i]) < len(prev) || !slices.Equal(prompts[i][:len(prev)], prev) {
			tb.Fatalf("call %d: prompt does not extend call %d's prompt and completion", i, i-1)
		}
		if c.PromptRef != i-1 || c.PromptShared < len(prompts[i-1])+len(t.Calls[i-1].CompletionTokens) {
			tb.Fatalf("call %d: prompt_ref %d shared %d, want a reference to call %d sharing its whole sequence", i, c.PromptRef, c.PromptShared, i-1)
		}
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
