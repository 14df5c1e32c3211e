package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"tau2rl/lib/inference/llmtest"
	"tau2rl/producers/proxy"
	"tau2rl/tau2/data"
)

// benchSetup is a proxy in front of the scripted server, with its metrics on
// a registry the benchmark reads, and τ²'s airline system prompt and tools
// (about 7k tokens: what real sessions carry).
func benchSetup(b *testing.B) (*harness, *prometheus.Registry, []json.RawMessage, string) {
	e := airlineEnv(b)
	h := newHarness(b, llmtest.Constant(llmtest.Reply{Content: "Sure, one moment."}), func(c *proxy.Config) {
		c.Limits.MaxSessions = 1 << 20
		c.Limits.MaxConcurrentCalls = 4096
		c.Limits.MaxCallsPerSession = 1 << 20
	})
	return h, h.reg, toolSchemas(e), data.AgentSystemPrompt(e.Policy)
}

func histogram(b *testing.B, reg *prometheus.Registry, name string) (sum float64, count uint64) {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var h *dto.Histogram = mf.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), h.GetSampleCount()
		}
	}
	b.Fatalf("no metric %s", name)
	return 0, 0
}

// post sends one chat call and discards the answer.
func post(client *http.Client, url, sid string, body []byte) (map[string]any, error) {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer k;session="+sid)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%d %s", resp.StatusCode, raw)
	}
	var out map[string]any
	return out, json.Unmarshal(raw, &out)
}

// BenchmarkOverhead1000Sessions: 1,000 sessions call the proxy concurrently,
// each a growing τ² airline conversation (system prompt and 14 tools, then
// user turns and answers), 8 calls per session before a new one opens.
// overhead-ms/call is the proxy's own time per call (parsing, matching,
// rendering, tokenizing, recording, building the answer), from
// tau2rl_proxy_overhead_seconds: the wall time of the handler minus the
// policy server's. Everything shares the machine's cores with the scripted
// server and the 1,000 clients.
func BenchmarkOverhead1000Sessions(b *testing.B) {
	h, reg, tools, system := benchSetup(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 2048}}
	const sessions = 1000
	b.SetParallelism((sessions + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var next atomic.Int64
	sum0, n0 := histogram(b, reg, "tau2rl_proxy_overhead_seconds")
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var msgs []any
		sid := ""
		for turn := 0; pb.Next(); turn++ {
			if turn%8 == 0 {
				sid = fmt.Sprintf("bench-%d", next.Add(1))
				msgs = []any{map[string]any{"role": "system", "content": system}}
			}
			msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("Question %d about my booking.", turn)})
			body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": tools})
			out, err := post(client, h.url, sid, body)
			if err != nil {
				b.Error(err)
				return
			}
			msgs = append(msgs, out["choices"].([]any)[0].(map[string]any)["message"])
		}
	})
	b.StopTimer()
	sum, n := histogram(b, reg, "tau2rl_proxy_overhead_seconds")
	gsum, gn := histogram(b, reg, "tau2rl_proxy_generation_seconds")
	if n > n0 {
		b.ReportMetric((sum-sum0)/float64(n-n0)*1e3, "overhead-ms/call")
		b.ReportMetric(gsum/float64(gn)*1e3, "generation-ms/call")
	}
}

// BenchmarkOverheadSerial is one session's calls one after the other: the
// proxy's overhead per call without contention.
func BenchmarkOverheadSerial(b *testing.B) {
	h, reg, tools, system := benchSetup(b)
	client := &http.Client{}
	var msgs []any
	sid := ""
	sum0, n0 := histogram(b, reg, "tau2rl_proxy_overhead_seconds")
	b.ResetTimer()
	for i := range b.N {
		if i%8 == 0 {
			sid = fmt.Sprintf("serial-%d", i)
			msgs = []any{map[string]any{"role": "system", "content": system}}
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("Question %d about my booking.", i)})
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": tools})
		out, err := post(client, h.url, sid, body)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, out["choices"].([]any)[0].(map[string]any)["message"])
	}
	b.StopTimer()
	sum, n := histogram(b, reg, "tau2rl_proxy_overhead_seconds")
	b.ReportMetric((sum-sum0)/float64(n-n0)*1e3, "overhead-ms/call")
}

// BenchmarkSessionMemory opens 1,000 sessions of one call each (τ²'s airline
// system prompt and tools, a user turn, an answer) and reports the heap
// they hold: bytes/session.
func BenchmarkSessionMemory(b *testing.B) {
	h, _, tools, system := benchSetup(b)
	client := &http.Client{}
	const sessions = 1000
	var perSession float64
	for i := range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := h.srv.OpenSessions()
		for k := range sessions {
			msgs := []any{map[string]any{"role": "system", "content": system},
				map[string]any{"role": "user", "content": fmt.Sprintf("Question %d about my booking.", k)}}
			body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": tools})
			if _, err := post(client, h.url, fmt.Sprintf("mem-%d-%d", i, k), body); err != nil {
				b.Fatal(err)
			}
		}
		client.CloseIdleConnections()
		time.Sleep(10 * time.Millisecond)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := h.srv.OpenSessions() - start; got != sessions {
			b.Fatalf("%d sessions open", got)
		}
		perSession = float64(after.HeapAlloc-before.HeapAlloc) / sessions
	}
	b.ReportMetric(perSession, "bytes/session")
}
