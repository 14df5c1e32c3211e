package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"tau2rl/lib/tau2/episode"
	"tau2rl/lib/uuid"

	"github.com/prometheus/client_golang/prometheus"

	"tau2rl/cmd/internal/cli"
	"tau2rl/consumers/dataset"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/tau2/data"
	"tau2rl/lib/tau2/evaluator"
	"tau2rl/producers/scripted"
	"tau2rl/schemas"
)

func scriptedURL(t *testing.T) (string, string) {
	t.Helper()
	if _, err := data.Dir(""); err != nil {
		t.Skipf("τ² data not found: %v", err)
	}
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

func runtime() *cli.Runtime {
	return &cli.Runtime{Registry: prometheus.NewRegistry(), Log: slog.New(slog.DiscardHandler), Ready: func() {}}
}

// TestRunWritesResultsAndPassK runs a few airline tasks in chat and token
// mode against the scripted server and checks the results file parses as
// τ²'s format and the pass^k table is printed.
func TestRunWritesResultsAndPassK(t *testing.T) {
	url, tokPath := scriptedURL(t)
	for _, mode := range []string{episode.ModeChat, episode.ModeToken} {
		t.Run(mode, func(t *testing.T) {
			cfg := defaultRunConfig()
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
			if err := runRun(ctx, &cfg, &out, runtime()); err != nil {
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

// TestReport computes pass^k per domain and version from a dataset.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	var trajs []*schemas.Trajectory
	mk := func(domain, task string, version int64, reward float64, status schemas.Status) {
		tr := &schemas.Trajectory{ID: uuid.New(), TaskID: task, Domain: domain, Split: "test", Status: status,
			PolicyVersionStart: version, Reward: reward, Termination: schemas.TerminationUserStop,
			StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), EndedAt: time.Date(2026, 1, 2, 3, 5, 5, 0, time.UTC)}
		if status != schemas.StatusOK {
			tr.Error, tr.Termination = "llm down", schemas.TerminationInfrastructureError
		}
		trajs = append(trajs, tr)
	}
	// airline v1: task a 2/2, task b 1/2 → pass^1 = (1 + .5)/2, pass^2 = (1 + 0)/2.
	mk("airline", "a", 1, 1, schemas.StatusOK)
	mk("airline", "a", 1, 1, schemas.StatusOK)
	mk("airline", "b", 1, 1, schemas.StatusOK)
	mk("airline", "b", 1, 0, schemas.StatusOK)
	mk("airline", "b", 1, 0, schemas.StatusInfraError)
	mk("airline", "a", 2, 0, schemas.StatusOK)
	mk("retail", "c", 1, 1, schemas.StatusOK)
	if _, err := dataset.WritePartitioned(dir, "part-0", trajs, schemas.ParquetWriterOptions{}); err != nil {
		t.Fatal(err)
	}
	ds, err := dataset.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := reportConfig{Dataset: dir, MaxK: 4, ByVersion: true, Format: "text"}
	rows, err := reportRows(context.Background(), ds, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	r := rows[0]
	if r.Domain != "airline" || *r.PolicyVersion != 1 || r.Tasks != 2 || r.Episodes != 5 || r.InfraErrors != 1 {
		t.Fatalf("row %+v", r)
	}
	if len(r.PassHatK) != 2 || r.PassHatK[0] != 0.75 || r.PassHatK[1] != 0.5 {
		t.Errorf("pass^k %v, want [0.75 0.5]", r.PassHatK)
	}
	var out bytes.Buffer
	if err := runReport(context.Background(), &cfg, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"airline v1", "airline v2", "retail v1", "pass^2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	cfg.ByVersion, cfg.Format = false, "json"
	out.Reset()
	if err := runReport(context.Background(), &cfg, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"domain": "airline"`) || strings.Contains(out.String(), "policy_version") {
		t.Errorf("json report:\n%s", out.String())
	}
}
