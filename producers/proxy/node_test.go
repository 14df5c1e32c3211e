package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"tau2rl/lib/inference/llmtest"
	"tau2rl/producers/proxy"
	"tau2rl/schemas"
)

// clientDir holds the npm clients the proxy is tested against (package.json,
// package-lock.json; `make deps-npm` runs npm ci there).
const clientDir = "testdata/client"

// needNodeClients skips when node or the npm packages are absent, unless
// TAU2RL_REQUIRE_ORACLE is set (CI), as the repository's other node
// oracles do.
func needNodeClients(tb testing.TB) {
	tb.Helper()
	why := ""
	if _, err := exec.LookPath("node"); err != nil {
		why = "node is not on PATH"
	} else {
		for _, p := range []string{"openai/package.json", "@openai/agents/package.json"} {
			if _, err := os.Stat(filepath.Join(clientDir, "node_modules", p)); err != nil {
				why = fmt.Sprintf("npm packages not installed (run `make deps-npm` or `cd producers/proxy/%s && npm ci`): %v", clientDir, err)
				break
			}
		}
	}
	if why == "" {
		return
	}
	if os.Getenv("TAU2RL_REQUIRE_ORACLE") != "" {
		tb.Fatalf("TAU2RL_REQUIRE_ORACLE is set but the npm clients cannot run: %s", why)
	}
	tb.Skip(why)
}

// runNode runs a client script with its JSON configuration and decodes its
// stdout into out.
func runNode(tb testing.TB, script string, cfg, out any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, jsonString(cfg))
	cmd.Dir = clientDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("node %s: %v\nstderr:\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		tb.Fatalf("node %s: output %q: %v\nstderr:\n%s", script, stdout.String(), err, stderr.String())
	}
}

// clientMessage is a message as the openai SDK client holds it.
type clientMessage struct {
	Role             string  `json:"role"`
	Content          *string `json:"content"`
	ReasoningContent *string `json:"reasoning_content"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// sameConversation checks the trajectory's conversation is the client's.
func sameConversation(tb testing.TB, got []schemas.Message, want []clientMessage) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("trajectory has %d messages, the client %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		str := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		if string(g.Role) != w.Role || g.Content != str(w.Content) || g.ToolCallID != w.ToolCallID ||
			(w.Role == "assistant" && g.Reasoning != str(w.ReasoningContent)) || len(g.ToolCalls) != len(w.ToolCalls) {
			tb.Fatalf("message %d differs:\ntrajectory %s\nclient     %s", i, jsonString(g), jsonString(w))
		}
		for k, tc := range w.ToolCalls {
			gt := g.ToolCalls[k]
			if gt.ID != tc.ID || gt.Name != tc.Function.Name || gt.Arguments != tc.Function.Arguments || tc.Type != "function" {
				tb.Fatalf("message %d tool call %d differs:\ntrajectory %s\nclient     %s", i, k, jsonString(gt), jsonString(tc))
			}
		}
	}
}

// The official openai npm package drives a τ² airline tool loop through the
// proxy: published and archived trajectories are token-exact against what
// the scripted SGLang server received, and the conversation is the client's.
func TestOpenAINodeClient(t *testing.T) {
	needNodeClients(t)
	cases := []struct {
		scenario string
		finishes []string
		drift    map[int]bool
		check    func(t *testing.T, h *harness, tr *schemas.Trajectory)
	}{
		{scenario: "basic", finishes: []string{"tool_calls", "tool_calls", "stop"}},
		{scenario: "stream", finishes: []string{"tool_calls", "tool_calls", "stop"}},
		{scenario: "max_tokens", finishes: []string{"tool_calls", "length", "stop"}, check: func(t *testing.T, h *harness, tr *schemas.Trajectory) {
			c := tr.Calls[1]
			if h.got.max[1] != 20 || len(c.CompletionTokens) != 20 || c.FinishReason != "length" || !c.InvalidFormat {
				t.Fatalf("client max_tokens 20: server budget %d, %d tokens, finish %q, invalid %v", h.got.max[1], len(c.CompletionTokens), c.FinishReason, c.InvalidFormat)
			}
		}},
		{scenario: "rewrite", finishes: []string{"tool_calls", "tool_calls", "stop"}, drift: map[int]bool{1: true}, check: func(t *testing.T, h *harness, tr *schemas.Trajectory) {
			if tr.Tags["template_drift"] != "1" {
				t.Fatalf("tags %v: want template_drift 1", tr.Tags)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.scenario, func(t *testing.T) {
			e := airlineEnv(t)
			t.Setenv("TAU2_PROXY_TEST_KEYS", "sk-test")
			h := newHarness(t, airlineScript(), func(c *proxy.Config) { c.Auth = proxy.AuthConfig{APIKeysEnv: "TAU2_PROXY_TEST_KEYS"} })
			sid := "node-" + tc.scenario
			var out struct {
				Messages []clientMessage `json:"messages"`
				Finishes []string        `json:"finishes"`
			}
			runNode(t, "agent.mjs", map[string]any{"baseURL": h.url + "/v1", "apiKey": "sk-test;session=" + sid + ";task=airline-7;group=g1",
				"toolsURL": toolServer(t, e), "system": "You are an airline agent.", "user": "What are my reservations? I am " + airlineUser,
				"scenario": tc.scenario}, &out)
			if !slices.Equal(out.Finishes, tc.finishes) {
				t.Fatalf("finish reasons %v, want %v", out.Finishes, tc.finishes)
			}
			h.finish(t, sid, 1)
			trajs := trajectories(t, h.kc, 1, 10*time.Second)
			if len(trajs) != 1 {
				t.Fatalf("%d trajectories published, want 1", len(trajs))
			}
			tr := archive(t, trajs)[0]
			if tr.TaskID != "airline-7" || tr.RequestID != "g1" || tr.Status != schemas.StatusOK || tr.Reward != 1 {
				t.Fatalf("trajectory task %q group %q status %q reward %v", tr.TaskID, tr.RequestID, tr.Status, tr.Reward)
			}
			checkTokenExact(t, h.tok, tr, h.got.all(), tc.drift)
			sameConversation(t, tr.Messages, out.Messages)
			last := out.Messages[len(out.Messages)-1]
			if tc.scenario != "max_tokens" && (last.ReasoningContent == nil || *last.ReasoningContent != fakeToolCallInThinking || len(last.ToolCalls) != 0) {
				t.Fatalf("final answer: reasoning %v, %d tool calls; a tool call inside <think> is thinking", last.ReasoningContent, len(last.ToolCalls))
			}
			if tc.check != nil {
				tc.check(t, h, tr)
			}
		})
	}
}

// The OpenAI Agents SDK runs unmodified against the proxy.
func TestOpenAIAgentsSDK(t *testing.T) {
	needNodeClients(t)
	e := airlineEnv(t)
	h := newHarness(t, airlineScript())
	var out struct {
		FinalOutput string `json:"finalOutput"`
		Items       int    `json:"items"`
	}
	runNode(t, "agents_sdk.mjs", map[string]any{"baseURL": h.url + "/v1", "apiKey": "sk-any;session=agents;task=airline-7",
		"toolsURL": toolServer(t, e), "system": "You are an airline agent.", "user": "What are my reservations? I am " + airlineUser}, &out)
	if out.FinalOutput != "I found both reservations; they are confirmed." {
		t.Fatalf("final output %q", out.FinalOutput)
	}
	h.finish(t, "agents", 0.5)
	trajs := trajectories(t, h.kc, 1, 10*time.Second)
	if len(trajs) != 1 {
		t.Fatalf("%d trajectories", len(trajs))
	}
	tr := archive(t, trajs)[0]
	checkTokenExact(t, h.tok, tr, h.got.all(), nil)
	if len(tr.Calls) != 3 || tr.Reward != 0.5 {
		t.Fatalf("%d calls, reward %v", len(tr.Calls), tr.Reward)
	}
}

// The official openai npm package, with its default retries, sends a call
// to an ended session once and gets a final error: 410 session_ended (a
// 409 was sent three times: the SDK retries 409).
func TestOpenAINodeClientEndedSessionNotRetried(t *testing.T) {
	needNodeClients(t)
	h := newHarness(t, llmtest.Constant(llmtest.Reply{Content: "ok"}))
	if code, out := h.chat(t, "node-ended", userTurn("hi")); code != 200 {
		t.Fatalf("%d %v", code, out)
	}
	h.finish(t, "node-ended", 1)
	var got struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
		Sends  int    `json:"sends"`
		MS     int    `json:"ms"`
	}
	runNode(t, "ended.mjs", map[string]any{"baseURL": h.url + "/v1", "apiKey": "sk-unused;session=node-ended"}, &got)
	if got.Status != 410 || got.Code != "session_ended" || got.Sends != 1 {
		t.Fatalf("the SDK got %d %q after %d sends (%d ms); want one send answered 410 session_ended", got.Status, got.Code, got.Sends, got.MS)
	}
}
