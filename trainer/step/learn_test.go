package step

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/cpu"
	"tau2rl/schemas"
	"tau2rl/trainer/offsets"
)

// The learning test: does GRPO through the real trainer (grouping, advantages, batch layout,
// prefix-tree packing, the decoupled PPO loss, backward, AdamW, checkpoint, reload) make a policy
// better at a task with a verifiable reward? A sign error in the loss, a mis-assigned advantage
// and a wrong LM-head gradient each make it fail (each was tried; docs/LEARNING.md records the
// failures).
//
// The toy task: a prompt (a shared 5-token "system prompt" and one task token) and a 2-token
// completion sampled from a tiny Qwen3 (gpu.TinyConfig with a vocabulary of 32, random init); the
// reward is the fraction of completion tokens congruent mod 4 to the token before them, so a
// random policy earns about 0.25. The sampler is a second backend that loads each checkpoint, as
// an inference server would, and draws every group at exactly the trainer's current version (so
// the run is deterministic). The expected reward of the policy is computed exactly, over all
// 32 + 32² completions, at every version.

const (
	learnVocab    = 32
	learnTasks    = 4
	learnGroup    = 8
	learnSteps    = 8
	learnMargin   = 0.35 // the expected reward must rise by at least this much
	learnCompLen  = 2
	learnSeed     = 20261125
	learnSysToken = 5
)

func learnPrompt(task int) []int32 {
	return []int32{1, 7, 11, 13, 17, int32(20 + task)}
}

// learnReward scores one completion token given the token before it (the task token for the
// first, the first for the second): 1 when they are congruent mod 4. What is rewarded depends on
// the context, so no context-free bias over the vocabulary (the LM head alone) can learn it: the
// transformer body must.
func learnReward(prev, tok int32) float64 {
	if (tok-prev)%4 == 0 {
		return 1
	}
	return 0
}

// nextDist returns p(· | prefix) over the vocabulary: one LogProbs call over a tree of the prefix
// chain plus one child per vocabulary token.
func nextDist(t testing.TB, be gpu.Backend, prefix []int32) []float64 {
	t.Helper()
	n := len(prefix)
	mb := &gpu.MicroBatch{}
	for i, tok := range prefix {
		mb.Tokens = append(mb.Tokens, tok)
		mb.Positions = append(mb.Positions, int32(i))
		mb.Parent = append(mb.Parent, int32(i-1))
		mb.SubtreeEnd = append(mb.SubtreeEnd, int32(n+learnVocab-1))
	}
	for v := 0; v < learnVocab; v++ {
		mb.Tokens = append(mb.Tokens, int32(v))
		mb.Positions = append(mb.Positions, int32(n))
		mb.Parent = append(mb.Parent, int32(n-1))
		mb.SubtreeEnd = append(mb.SubtreeEnd, int32(n+v))
	}
	lp, _, err := be.LogProbs(mb)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]float64, learnVocab)
	for v := range p {
		p[v] = math.Exp(float64(lp[n+v]))
	}
	return p
}

// expectedReward is the policy's exact mean reward on task: one LogProbs call over the tree of
// every completion (the prompt chain, each first token, each second token under each).
func expectedReward(t testing.TB, be gpu.Backend, task int) float64 {
	t.Helper()
	prompt := learnPrompt(task)
	n := int32(len(prompt))
	mb := &gpu.MicroBatch{}
	add := func(tok, pos, parent, end int32) {
		mb.Tokens = append(mb.Tokens, tok)
		mb.Positions = append(mb.Positions, pos)
		mb.Parent = append(mb.Parent, parent)
		mb.SubtreeEnd = append(mb.SubtreeEnd, end)
	}
	last := n + learnVocab*(learnVocab+1) - 1
	for i, tok := range prompt {
		add(tok, int32(i), int32(i)-1, last)
	}
	for v := int32(0); v < learnVocab; v++ {
		first := int32(len(mb.Tokens))
		add(v, n, n-1, first+learnVocab)
		for w := int32(0); w < learnVocab; w++ {
			add(w, n+1, first, int32(len(mb.Tokens)))
		}
	}
	lp, _, err := be.LogProbs(mb)
	if err != nil {
		t.Fatal(err)
	}
	var e float64
	for v := 0; v < learnVocab; v++ {
		first := int(n) + v*(learnVocab+1)
		var second float64
		for w := 0; w < learnVocab; w++ {
			second += math.Exp(float64(lp[first+1+w])) * learnReward(int32(v), int32(w))
		}
		e += math.Exp(float64(lp[first])) * (learnReward(prompt[n-1], int32(v)) + second) / learnCompLen
	}
	return e
}

func meanExpectedReward(t testing.TB, be gpu.Backend) float64 {
	var s float64
	for task := 0; task < learnTasks; task++ {
		s += expectedReward(t, be, task)
	}
	return s / learnTasks
}

func draw(rng *rand.Rand, p []float64) int {
	u, c := rng.Float64(), 0.0
	for v, pv := range p {
		if c += pv; u < c {
			return v
		}
	}
	return len(p) - 1
}

// toySampler is the inference server and the producers of the toy task: a Reloader (it loads
// each checkpoint the trainer writes) and a Source (it samples batch k once it serves version k).
type toySampler struct {
	t       testing.TB
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every reload
	be      gpu.Backend
	version int64
	curve   []float64 // expected reward per version
	queue   []Message
	batches int64
	offset  int64
}

func newToySampler(t testing.TB, be gpu.Backend) *toySampler {
	s := &toySampler{t: t, be: be, changed: make(chan struct{})}
	s.curve = append(s.curve, meanExpectedReward(t, be))
	return s
}

func (s *toySampler) LoadWeights(_ context.Context, path string, version int64) error {
	be, err := cpu.Load(path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.be.Close()
	// curve holds one entry per version: the fresh trainer's first reload serves version 0 again
	// (its initial weights, under its initial version) and replaces the server's own.
	if version == s.version && len(s.curve) > 0 {
		s.curve = s.curve[:len(s.curve)-1]
	}
	s.be, s.version = be, version
	s.curve = append(s.curve, meanExpectedReward(s.t, be))
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

func (s *toySampler) Commit(context.Context, []offsets.Target) error { return nil }

func (s *toySampler) Next(ctx context.Context) (Message, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			m := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return m, nil
		}
		if s.version >= s.batches { // the batch of version s.batches can be drawn now
			err := s.sample()
			s.mu.Unlock()
			if err != nil {
				return Message{}, err
			}
			continue
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// sample draws one group per task at the current version (s.mu held).
func (s *toySampler) sample() error {
	rng := rand.New(rand.NewPCG(learnSeed, uint64(s.batches)))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for task := 0; task < learnTasks; task++ {
		prompt := learnPrompt(task)
		p1 := nextDist(s.t, s.be, prompt)
		second := map[int][]float64{}
		var trajs []*schemas.Trajectory
		for m := 0; m < learnGroup; m++ {
			v := draw(rng, p1)
			p2, ok := second[v]
			if !ok {
				p2 = nextDist(s.t, s.be, append(append([]int32(nil), prompt...), int32(v)))
				second[v] = p2
			}
			w := draw(rng, p2)
			tr := &schemas.Trajectory{
				ID: fmt.Sprintf("toy-%d-%d-%d", s.batches, task, m), TaskID: fmt.Sprint(task), Domain: "toy", Split: "train",
				Trial: m, StartedAt: start, EndedAt: start.Add(time.Second), PolicyVersionStart: s.version,
				Termination: schemas.TerminationAgentStop, Status: schemas.StatusOK,
				Reward: (learnReward(prompt[len(prompt)-1], int32(v)) + learnReward(int32(v), int32(w))) / learnCompLen,
			}
			tr.ShapedReward = tr.Reward
			if _, err := tr.AppendCall(schemas.CallInput{Prompt: prompt, Completion: []int32{int32(v), int32(w)},
				BehaviorLogprobs: []float32{float32(math.Log(p1[v])), float32(math.Log(p2[w]))}, Version: s.version,
				ShapedReward: tr.Reward, FinishReason: "stop"}); err != nil {
				return err
			}
			if err := tr.Validate(); err != nil {
				return err
			}
			trajs = append(trajs, tr)
		}
		s.queue = append(s.queue, Message{Trajectories: trajs, Topic: "toy", Partition: 0, Offset: s.offset})
		s.offset++
	}
	s.batches++
	return nil
}

// TestGRPOLearns: 8 GRPO steps on the toy task with AReaL's τ² loss settings (decoupled loss,
// eps_clip 0.4, behav_imp_weight_cap 5, max_head_offpolicyness 2) raise the policy's exact
// expected reward by at least learnMargin over its random-init value, with fixed seeds.
func TestGRPOLearns(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchSize = learnTasks
	cfg.Group.Size, cfg.Group.MinSize, cfg.Group.Timeout = learnGroup, learnGroup, time.Hour
	cfg.MaxSteps = learnSteps
	cfg.Actor.MBSpec.MaxTokensPerMB = 256
	cfg.Actor.Optimizer.LR = 3e-2
	cfg.Actor.Optimizer.WeightDecay = 0
	// Every batch must make exactly one step (the sampler draws the next batch only at the next
	// version): groups of equal rewards are trained with advantage 0 instead of dropped.
	cfg.Actor.Advantage.DropEqualRewards = false
	cfg.Checkpoint.Dir, cfg.Checkpoint.Keep, cfg.Checkpoint.DType = t.TempDir(), 2, string(gpu.F32)
	cfg.Tick = time.Hour

	mc := gpu.TinyConfig()
	mc.VocabSize = learnVocab
	trainBE, err := cpu.NewRandom(mc, learnSeed)
	if err != nil {
		t.Fatal(err)
	}
	defer trainBE.Close()
	sampleBE, err := cpu.NewRandom(mc, learnSeed) // the server starts from the same weights
	if err != nil {
		t.Fatal(err)
	}
	s := newToySampler(t, sampleBE)
	tr, err := New(cfg, Deps{Backend: trainBE, Source: s, Reloader: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	curve := append([]float64(nil), s.curve...)
	s.mu.Unlock()
	t.Logf("expected reward per policy version: %.3f", curve)
	if len(curve) != learnSteps+1 {
		t.Fatalf("%d versions served, want %d", len(curve), learnSteps+1)
	}
	if gain := curve[learnSteps] - curve[0]; gain < learnMargin {
		t.Fatalf("expected reward %.3f → %.3f (+%.3f): GRPO must raise it by ≥ %.2f", curve[0], curve[learnSteps], gain, learnMargin)
	}
}
