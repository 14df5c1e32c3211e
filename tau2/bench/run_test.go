package bench

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/scripted"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"tau2rl/tau2/episode"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/tau2test"
)

func scriptedURL(t *testing.T) (string, string) {
	t.Helper()
	tau2test.DataDir(t)
	tok, path := tokenizertest.Qwen3(t), tokenizertest.Path(t)
	cfg := scripted.DefaultConfig()
	cfg.ErrorRate = 0.4
	s, err := scripted.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer(tok, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.URL, path
}

func deps() Deps {
	return Deps{Registry: prometheus.NewRegistry(), Log: slog.New(slog.DiscardHandler)}
}

// TestRunWritesResultsAndPassK runs a few airline tasks in chat and token
// mode against the scripted server and checks the results file parses as
// τ²'s format and the pass^k table is printed.
func TestRunWritesResultsAndPassK(t *testing.T) {
	url, tokPath := scriptedURL(t)
	for _, mode := range []string{episode.ModeChat, episode.ModeToken} {
		t.Run(mode, func(t *testing.T) {
			cfg := DefaultRunConfig()
			cfg.Econfig.Domain = "airline"
			cfg.Econfig.UserLLMBaseURL = url + "/v1"
			cfg.Split = "test"
			cfg.NumTasks = 3
			cfg.NumTrials = 2
			cfg.Concurrency = 3
			cfg.Policy.Mode = mode
			cfg.Policy.Tokenizer = tokPath
			cfg.Policy.Endpoints = []episode.Endpoint{{EndpointConfig: llm.EndpointConfig{BaseURL: url}}}
			cfg.Policy.Chat.Endpoint.BaseURL = url + "/v1"
			cfg.Policy.Chat.Model = "scripted-agent"
			cfg.Output = filepath.Join(t.TempDir(), "results.json")
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := Run(ctx, &cfg, &out, deps()); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "pass^2") || !strings.Contains(out.String(), "airline") {
				t.Errorf("table:\n%s", out.String())
			}
			b, err := os.ReadFile(cfg.Output)
			if err != nil {
				t.Fatal(err)
			}
			res, err := evaluator.ParseResults(b)
			if err != nil {
				t.Fatalf("results file does not parse as τ² results: %v", err)
			}
			if d, err := res.Domain(); err != nil || d != "airline" || res.NumTrials() != 2 {
				t.Errorf("domain %q (%v), trials %d", d, err, res.NumTrials())
			}
			// Re-grading the file with the evaluator agrees with the run.
			_, sims, err := evaluator.Regrade(ctx, res, evaluator.RegradeOptions{Options: evaluator.Options{Domain: "airline", Strict: true}})
			if err != nil {
				t.Fatal(err)
			}
			if len(sims) != 6 {
				t.Fatalf("%d simulations", len(sims))
			}
			for _, s := range sims {
				if s.Err != nil {
					t.Errorf("regrade: %v", s.Err)
				}
			}
			t.Logf("\n%s", out.String())
		})
	}
}

// chatRunConfig is a small chat-mode run against url (user simulator) with the policy at policyURL.
func chatRunConfig(t *testing.T, url, policyURL string) RunConfig {
	cfg := DefaultRunConfig()
	cfg.Econfig.Domain = "airline"
	cfg.Econfig.UserLLMBaseURL = url + "/v1"
	cfg.Split, cfg.NumTasks, cfg.NumTrials, cfg.Concurrency = "test", 2, 2, 2
	cfg.Policy.Mode = episode.ModeChat
	cfg.Policy.Chat.Endpoint.BaseURL = policyURL + "/v1"
	cfg.Policy.Chat.Model = "scripted-agent"
	cfg.Output = filepath.Join(t.TempDir(), "results.json")
	return cfg
}

// TestRunAllInfraErrorsFails: when no simulation could be graded, run writes the results file,
// says there was nothing to average instead of "avg 0.000", and fails; the upstream error stored
// as info.error has the API key redacted even though the server echoed it.
func TestRunAllInfraErrorsFails(t *testing.T) {
	url, _ := scriptedURL(t)
	down, err := llmtest.NewServer(tokenizertest.Qwen3(t), llmtest.Constant(llmtest.Reply{Content: "unused"}))
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	down.ReflectAuthNext(1000, 500)
	const key = "sk-proj-0123456789abcdefghijklmnop"
	cfg := chatRunConfig(t, url, down.URL)
	cfg.Policy.Chat.Endpoint.APIKey, cfg.Policy.Chat.Endpoint.MaxRetries = key, 0
	var out bytes.Buffer
	err = Run(context.Background(), &cfg, &out, deps())
	if err == nil || errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "infrastructure errors") {
		t.Fatalf("err = %v, want a failure that is no usage error", err)
	}
	if strings.Contains(err.Error(), "0123456789abcdef") {
		t.Errorf("the API key leaked into the error: %v", err)
	}
	if !strings.Contains(out.String(), "none") || !strings.Contains(out.String(), "no graded simulations") || strings.Contains(out.String(), "0.000") {
		t.Errorf("table does not say nothing was graded:\n%s", out.String())
	}
	b, err := os.ReadFile(cfg.Output)
	if err != nil {
		t.Fatalf("no results file: %v", err)
	}
	res, err := evaluator.ParseResults(b)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Sims); n != 4 {
		t.Errorf("%d simulations in the file, want 4", n)
	}
	if strings.Contains(string(b), "0123456789abcdef") || !strings.Contains(string(b), "[REDACTED]") {
		t.Errorf("results file: the API key is not redacted from info.error")
	}
}

// cancelOnFirst is a slog handler that cancels a context when the first simulation finishes, as
// a SIGINT in the middle of a run would.
type cancelOnFirst struct {
	slog.Handler
	cancel context.CancelFunc
}

func (h cancelOnFirst) Enabled(context.Context, slog.Level) bool { return true }

func (h cancelOnFirst) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "simulation done" {
		h.cancel()
	}
	return nil
}

// TestRunInterruptedWritesPartial: an interrupted run writes the simulations that finished to -o
// and fails (it used to exit 0 and write nothing).
func TestRunInterruptedWritesPartial(t *testing.T) {
	url, _ := scriptedURL(t)
	cfg := chatRunConfig(t, url, url)
	cfg.NumTasks, cfg.NumTrials, cfg.Concurrency = 3, 1, 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := deps()
	d.Log = slog.New(cancelOnFirst{Handler: slog.DiscardHandler, cancel: cancel})
	var out bytes.Buffer
	err := Run(ctx, &cfg, &out, d)
	if err == nil || !strings.Contains(err.Error(), "interrupted") || errors.Is(err, context.Canceled) || errors.Is(err, ErrUsage) {
		t.Fatalf("err = %v, want an interruption that is not a clean shutdown", err)
	}
	b, err := os.ReadFile(cfg.Output)
	if err != nil {
		t.Fatalf("no partial results file: %v", err)
	}
	res, err := evaluator.ParseResults(b)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Sims); n != 1 {
		t.Errorf("%d simulations in the partial file, want the 1 that finished", n)
	}
}
