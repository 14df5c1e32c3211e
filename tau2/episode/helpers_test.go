package episode_test

import (
	"testing"

	"tau2rl/lib/inference/tokenizer/tokenizertest"

	"tau2rl/lib/inference/chattemplate"
	"tau2rl/lib/inference/llm"
	"tau2rl/lib/inference/llmtest"
	"tau2rl/lib/inference/scripted"
	"tau2rl/tau2/episode"
	"tau2rl/tau2/evaluator"
	"tau2rl/tau2/tau2test"
)

// env is a scripted server plus a runner wired to it.
type testEnv struct {
	srv    *llmtest.Server
	runner *episode.Runner
}

type envOpts struct {
	domain    string
	chatAgent bool
	mode      chattemplate.Mode
	errorRate float64
	kinds     []string
	solo      bool
	script    llmtest.Script // overrides the scripted behaviours
	thinking  bool
	retrieval string // banking_knowledge's retrieval_config
}

func newTestEnv(tb testing.TB, o envOpts) *testEnv {
	tb.Helper()
	tk := tokenizertest.Qwen3(tb)
	dir := tau2test.DataDir(tb)
	script := o.script
	if script == nil {
		cfg := scripted.DefaultConfig()
		cfg.ErrorRate = o.errorRate
		if o.kinds != nil {
			cfg.ErrorKinds = o.kinds
		}
		s, err := scripted.New(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		script = s
	}
	srv, err := llmtest.NewServer(tk, script)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	ep := llm.DefaultEndpointConfig()
	ep.BaseURL = srv.URL
	ep.MaxRetries = 1
	ep.BackoffBase = 1e6
	ep.BackoffMax = 1e7
	cfg := episode.DefaultConfig()
	cfg.Domain = o.domain
	cfg.UserLLMBaseURL = srv.URL + "/v1"
	cfg.SoloMode = o.solo
	cfg.AddThinkingTool = o.thinking
	cfg.RetrievalConfig = o.retrieval
	r := &episode.Runner{Config: cfg, DataDir: dir, AgentModel: "scripted-agent", UserModel: "scripted-user"}
	if o.chatAgent {
		c, err := llm.NewChat(llm.ChatConfig{Endpoint: withBase(ep, srv.URL+"/v1"), Model: "scripted-agent"}, nil)
		if err != nil {
			tb.Fatal(err)
		}
		r.Agents = &episode.ChatAgentFactory{Chat: c, Model: "scripted-agent"}
	} else {
		pol, _, err := llm.NewPolicy(llm.PolicyConfig{Backend: llm.BackendSGLang, Endpoints: []llm.EndpointConfig{ep}}, nil)
		if err != nil {
			tb.Fatal(err)
		}
		r.Agents = &episode.TokenAgentFactory{Policy: pol, Tokenizer: tk, Mode: o.mode, EngineMaxTokens: 32768, DefaultMaxTokens: 2048,
			Version: func() int64 { return 3 }}
	}
	uc, err := llm.NewChat(llm.ChatConfig{Endpoint: withBase(ep, srv.URL+"/v1"), Model: "scripted-user"}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	r.Users = &episode.ChatUserFactory{Chat: uc, Model: "scripted-user", Args: cfg.UserLLMArgs, SendSeed: true}
	g, err := episode.NewTauGrader(evaluator.Options{Domain: o.domain, DataDir: dir, Solo: o.solo}, 2)
	if err != nil {
		tb.Fatal(err)
	}
	r.Grader = g
	return &testEnv{srv: srv, runner: r}
}

func withBase(e llm.EndpointConfig, url string) llm.EndpointConfig {
	e.BaseURL = url
	return e
}

func tasks(tb testing.TB, domain, split string) *episode.TaskSet {
	tb.Helper()
	s, err := episode.LoadTasks("", domain, split)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
