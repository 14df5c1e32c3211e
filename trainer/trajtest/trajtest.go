// Package trajtest makes small SYNTHETIC scored trajectories for tests of the trainer (like
// net/http/httptest for HTTP): τ²-shaped — a system prompt shared by every call, a task prompt
// shared by the group, token-exact multi-call episodes — over a vocabulary small enough for the
// tiny model of gpu.TinyConfig. They are never τ² episodes and must not be trained on for real.
package trajtest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"tau2rl/schemas"
)

// Options shape a group of synthetic episodes.
type Options struct {
	Domain, Split string
	// Vocab bounds token ids to [3, Vocab) (0–2 are left for specials).
	Vocab int
	// SystemTokens is the shared system-prompt length.
	SystemTokens int
	// Calls per episode and completion length per call.
	Calls, CompletionTokens int
	// Version is the policy version of every generated token.
	Version int64
	// Behavior is the behaviour log-prob recorded for every completion token.
	Behavior float32
	// RequestID is echoed into each trajectory.
	RequestID string
}

// Default returns options for gpu.TinyConfig (vocab 64).
func Default() Options {
	return Options{Domain: "airline", Split: "train", Vocab: 64, SystemTokens: 12, Calls: 2, CompletionTokens: 4,
		Behavior: -4.1}
}

// Group returns n episodes of task with the given rewards (len(rewards) == n), ids
// "<task>-<seed>-<i>". The same seed gives the same episodes.
func Group(o Options, task string, seed uint64, rewards []float64) ([]*schemas.Trajectory, error) {
	if o.Vocab < 4 || o.Calls < 1 || o.CompletionTokens < 1 || o.SystemTokens < 0 {
		return nil, fmt.Errorf("trajtest: options %+v: need vocab ≥ 4, ≥ 1 call and completion token", o)
	}
	rng := rand.New(rand.NewPCG(seed, 0x7a7))
	sysRng := rand.New(rand.NewPCG(1, 1)) // the system prompt is the same for every task
	tok := func(r *rand.Rand) int32 { return int32(3 + r.IntN(o.Vocab-3)) }
	system := make([]int32, o.SystemTokens)
	for i := range system {
		system[i] = tok(sysRng)
	}
	taskPrompt := []int32{tok(rng), tok(rng), tok(rng)}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []*schemas.Trajectory
	for i, r := range rewards {
		t := &schemas.Trajectory{
			ID: fmt.Sprintf("%s-%d-%d", task, seed, i), TaskID: task, Domain: o.Domain, Split: o.Split, RequestID: o.RequestID,
			Trial: i, StartedAt: start, EndedAt: start.Add(time.Minute), PolicyVersionStart: o.Version,
			Termination: schemas.TerminationAgentStop, Reward: r, ShapedReward: r, Status: schemas.StatusOK,
		}
		prompt := append(append([]int32(nil), system...), taskPrompt...)
		for c := 0; c < o.Calls; c++ {
			comp := make([]int32, o.CompletionTokens)
			lp := make([]float32, o.CompletionTokens)
			for k := range comp {
				comp[k] = tok(rng)
				lp[k] = o.Behavior
			}
			if _, err := t.AppendCall(schemas.CallInput{Prompt: prompt, Completion: comp, BehaviorLogprobs: lp, Version: o.Version,
				ShapedReward: r, FinishReason: "stop"}); err != nil {
				return nil, fmt.Errorf("trajtest: %w", err)
			}
			prompt = append(append(append([]int32(nil), prompt...), comp...), tok(rng), tok(rng)) // + tool result
		}
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("trajtest: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Rewards returns n alternating rewards 1, 0, 1, … (every group has a spread, so none is
// filtered).
func Rewards(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		if i%2 == 0 {
			out[i] = 1
		}
	}
	return out
}
