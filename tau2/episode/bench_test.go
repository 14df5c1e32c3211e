package episode_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tau2rl/lib/inference/llm"
	"tau2rl/schemas"
	"tau2rl/tau2/episode"
)

// recorder captures one episode's policy results (by call number) and user
// turns, so that benchmarks can replay them without any LLM.
type recorder struct {
	llm.Policy
	mu      sync.Mutex
	results map[int]llm.GenerateResult
}

func (r *recorder) Generate(ctx context.Context, req llm.GenerateRequest) (llm.GenerateResult, error) {
	res, err := r.Policy.Generate(ctx, req)
	if err == nil {
		tag, _ := episode.ParseTag(req.RequestID)
		r.mu.Lock()
		r.results[tag.Call] = res
		r.mu.Unlock()
	}
	return res, err
}

// replayPolicy answers call n of any episode with the recorded result n.
type replayPolicy struct{ results map[int]llm.GenerateResult }

func (p *replayPolicy) Generate(_ context.Context, req llm.GenerateRequest) (llm.GenerateResult, error) {
	tag, err := episode.ParseTag(req.RequestID)
	if err != nil {
		return llm.GenerateResult{}, err
	}
	res, ok := p.results[tag.Call]
	if !ok {
		return llm.GenerateResult{}, fmt.Errorf("no recorded call %d", tag.Call)
	}
	return res, nil
}

type recUserFactory struct {
	episode.UserFactory
	mu    sync.Mutex
	turns []episode.UserTurn
}

func (f *recUserFactory) NewUser(spec episode.UserSpec) (episode.User, error) {
	u, err := f.UserFactory.NewUser(spec)
	return &recUser{u: u, f: f}, err
}

type recUser struct {
	u episode.User
	f *recUserFactory
}

func (u *recUser) Respond(ctx context.Context, in []schemas.Message) (episode.UserTurn, error) {
	t, err := u.u.Respond(ctx, in)
	if err == nil {
		u.f.mu.Lock()
		u.f.turns = append(u.f.turns, t)
		u.f.mu.Unlock()
	}
	return t, err
}

type replayUsers struct{ turns []episode.UserTurn }

func (f *replayUsers) NewUser(episode.UserSpec) (episode.User, error) {
	return &replayUser{turns: f.turns}, nil
}

type replayUser struct {
	turns []episode.UserTurn
	n     int
}

func (u *replayUser) Respond(context.Context, []schemas.Message) (episode.UserTurn, error) {
	if u.n >= len(u.turns) {
		return episode.UserTurn{}, fmt.Errorf("no recorded user turn %d", u.n)
	}
	t := u.turns[u.n]
	t.Message.ToolCalls = append([]schemas.ToolCall(nil), t.Message.ToolCalls...)
	u.n++
	return t, nil
}

// BenchmarkEpisodeStepOverhead measures the producer's own work per τ²
// step — environment tool calls, chat-template deltas and tokenization,
// token capture (AppendCall), routing, and grading amortized over the
// episode — with LLM time excluded: the policy's and the user's answers are
// replayed from a recorded airline episode.
func BenchmarkEpisodeStepOverhead(b *testing.B) {
	for _, domain := range []string{"airline", "telecom"} {
		b.Run(domain, func(b *testing.B) {
			te := newTestEnv(b, envOpts{domain: domain})
			tf := te.runner.Agents.(*episode.TokenAgentFactory)
			rec := &recorder{Policy: tf.Policy, results: map[int]llm.GenerateResult{}}
			tf.Policy = rec
			ru := &recUserFactory{UserFactory: te.runner.Users}
			te.runner.Users = ru
			set := tasks(b, domain, "train")
			var task = set.Tasks[0]
			for _, t := range set.Tasks {
				if c := t.EvaluationCriteria; c != nil && len(c.Actions) >= 2 {
					task = t
					break
				}
			}
			in := episode.Input{Task: task, Split: "train", ID: "bench", Sampling: schemas.SamplingParams{MaxTokens: 1024}}
			first := te.runner.Run(context.Background(), in)
			if first.Infra != nil || first.Traj.Reward != 1 {
				b.Fatalf("recording run: %v reward %v", first.Infra, first.Traj.Reward)
			}
			te.runner.Agents = &episode.TokenAgentFactory{Policy: &replayPolicy{results: rec.results}, Tokenizer: tf.Tokenizer,
				EngineMaxTokens: tf.EngineMaxTokens, DefaultMaxTokens: tf.DefaultMaxTokens, Version: tf.Version}
			te.runner.Users = &replayUsers{turns: ru.turns}
			steps := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res := te.runner.Run(context.Background(), in)
				if res.Infra != nil || res.Traj.Reward != 1 {
					b.Fatalf("replay: %v reward %v", res.Infra, res.Traj.Reward)
				}
				steps += res.Stats.Steps
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(steps), "ms/step")
			b.ReportMetric(float64(steps)/float64(b.N), "steps/episode")
		})
	}
}

// BenchmarkEpisodesScripted runs whole episodes concurrently against the
// scripted HTTP server (token mode, real wire format) and reports
// episodes/s and the heap held per concurrent episode.
func BenchmarkEpisodesScripted(b *testing.B) {
	const concurrency = 64
	te := newTestEnv(b, envOpts{domain: "airline", errorRate: 0.3})
	set := tasks(b, "airline", "train")
	var peak atomic.Uint64
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	stop := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
		}
	}()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				task := set.Tasks[i%len(set.Tasks)]
				res := te.runner.Run(context.Background(), episode.Input{Task: task, Split: "train", ID: fmt.Sprintf("b%d", i),
					Sampling: schemas.SamplingParams{MaxTokens: 1024}})
				if res.Infra != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(stop)
	if failed.Load() > 0 {
		b.Fatalf("%d episodes ended with infrastructure errors", failed.Load())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "episodes/s")
	if p := peak.Load(); p > base.HeapInuse {
		b.ReportMetric(float64(p-base.HeapInuse)/float64(min(concurrency, b.N))/1024, "KiB/concurrent-episode")
	}
}
