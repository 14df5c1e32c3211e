package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/scripted"
	"tau2rl/lib/inference/tokenizer/tokenizertest"
	"tau2rl/tau2/episode"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/tau2test"
)

// TestRetailWithoutJudgeThenGradeWithJudge runs a retail task whose basis
// needs the NL judge without one: the results file keeps the real
// termination (user_stop) with a null reward_info, pass^k excludes it as not
// evaluated and it is no infrastructure error. `tau2-eval grade` with
// judge.endpoint.base_url pointing at a scripted OpenAI-compatible judge on
// loopback then calls the judge and writes a reward (issue 13 item 8: the
// file said infrastructure_error, so grade sent 0 judge requests and wrote
// reward 0 "terminated prematurely").
func TestRetailWithoutJudgeThenGradeWithJudge(t *testing.T) {
	tau2test.DataDir(t)
	// A policy that plays the gold actions without errors, so that the DB check passes and only
	// the NL assertion is left open.
	scfg := scripted.DefaultConfig()
	scfg.ErrorRate = 0
	script, err := scripted.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := llmtest.NewServer(tokenizertest.Qwen3(t), script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	url, tokPath := srv.URL, tokenizertest.Path(t)
	cfg := DefaultRunConfig()
	cfg.Econfig.Domain = "retail"
	cfg.Econfig.UserLLMBaseURL = url + "/v1"
	cfg.Split = "train"
	cfg.TaskIDs = []string{"2"} // DB + NL_ASSERTION with one assertion
	cfg.NumTrials = 1
	cfg.Concurrency = 1
	cfg.Policy.Mode = episode.ModeToken
	cfg.Policy.Tokenizer = tokPath
	cfg.Policy.Endpoints = []episode.Endpoint{{EndpointConfig: llm.EndpointConfig{BaseURL: url}}}
	cfg.Output = filepath.Join(t.TempDir(), "results.json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := Run(ctx, &cfg, &out, deps()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cfg.Output)
	if err != nil {
		t.Fatal(err)
	}
	res, err := evaluator.ParseResults(b)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := res.Simulation(0)
	if err != nil {
		t.Fatal(err)
	}
	if sim.TerminationReason != evaluator.TerminationUserStop || sim.RewardInfo != nil {
		t.Fatalf("simulation termination %q reward_info %v; want user_stop and null", sim.TerminationReason, sim.RewardInfo)
	}
	t.Logf("run:\n%s", out.String())
	if !strings.Contains(string(b), `"not_evaluated"`) {
		t.Errorf("results file does not say the simulation was not evaluated")
	}

	// The judge: a scripted OpenAI-compatible server on loopback that finds every assertion met.
	judge, err := llmtest.NewServer(tokenizertest.Qwen3(t), llmtest.ScriptFunc(func(ctx context.Context, c *llmtest.Call) (llmtest.Reply, error) {
		return llmtest.Reply{Content: `{"results": [{"expectedOutcome": "the assertion", "reasoning": "the agent did it", "metExpectation": true}]}`}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { judge.Close() })
	g := DefaultGradeConfig()
	g.Input = cfg.Output
	g.Output = filepath.Join(t.TempDir(), "regraded.json")
	g.Judge.Endpoint.BaseURL = judge.URL + "/v1"
	g.Judge.Endpoint.MaxRetries = 0
	out.Reset()
	if err := Grade(ctx, &g, &out, deps()); err != nil {
		t.Fatalf("grade: %v\n%s", err, out.String())
	}
	if n := judge.Requests("/v1/chat/completions"); n == 0 {
		t.Fatalf("grade sent no judge request:\n%s", out.String())
	}
	rb, err := os.ReadFile(g.Output)
	if err != nil {
		t.Fatal(err)
	}
	rres, err := evaluator.ParseResults(rb)
	if err != nil {
		t.Fatal(err)
	}
	rsim, err := rres.Simulation(0)
	if err != nil {
		t.Fatal(err)
	}
	if rsim.RewardInfo == nil {
		t.Fatal("regraded simulation has no reward_info")
	}
	if v, _ := rsim.RewardInfo.Get("nl_assertions"); v == nil {
		t.Fatalf("regraded reward_info has no NL assertions: %s", rb)
	}
	if strings.Contains(string(rb), "terminated prematurely") {
		t.Fatal("regraded as a premature termination")
	}
	t.Logf("\n%s", out.String())
}
