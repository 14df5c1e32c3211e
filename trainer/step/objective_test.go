package step

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/trainer/feed"
	"tau2rl/trainer/loss"
)

// reinforce is an objective this package has never heard of, registered from a test file the
// way a new objective registers in trainer/loss/registry.go: plain REINFORCE,
// loss = −Σ_r A_r · logp[node(r)] / N. It counts its calls, so the tests see it ran on every
// micro-batch, the follower host's included.
type reinforce struct{ calls *atomic.Int64 }

var reinforceCalls atomic.Int64

const reinforceName = "test_reinforce"

func init() {
	loss.Register(reinforceName, func(loss.Config) (loss.Objective, error) { return reinforce{&reinforceCalls}, nil })
}

func (reinforce) Name() string { return reinforceName }

func (o reinforce) Compute(in loss.Input) (loss.Result, error) {
	o.calls.Add(1)
	mb := in.MB
	d := make([]float32, mb.Len())
	var total float64
	for node := range d {
		var g float64
		for r := mb.RefStart[node]; r < mb.RefStart[node+1]; r++ {
			s := in.Seqs[mb.RefSeq[r]]
			a := float64(s.Adv[mb.RefTok[r]-s.Offset])
			total -= a * float64(in.Logp[node]) / float64(in.N)
			g -= a / float64(in.N)
		}
		d[node] = float32(g)
	}
	return loss.Result{Loss: total, DLogp: d, Stats: loss.Stats{Tokens: int64(len(mb.RefSeq))}}, nil
}

// TestNewObjectivePlugsIn: an objective registered outside trainer/step, trainer/feed and
// trainer/sft is selected by actor.objective alone and trains: on one backend, and on two hosts
// over the feed (the follower builds it from the settings the leader sends), where it runs on
// as many micro-batches and yields the same weights as on one backend; and it is not PPO (the
// weights differ from a PPO run's). An unregistered name fails the configuration's validation.
func TestNewObjectivePlugsIn(t *testing.T) {
	w, err := gpu.NewRandomWeights(gpu.TinyConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	useIt := func(c *Config) { c.Actor.Objective = reinforceName }

	reinforceCalls.Store(0)
	oneDir, one := trainTwoStepsWith(t, newBackend(t), nil, useIt)
	oneCalls := reinforceCalls.Load()
	if oneCalls == 0 {
		t.Fatal("the registered objective never ran")
	}
	ppoDir, _ := trainTwoStepsWith(t, newBackend(t), nil, func(*Config) {})
	if name, _ := firstDiff(must(gpu.LoadWeights(oneDir)), must(gpu.LoadWeights(ppoDir))); name == "" {
		t.Fatal("the registered objective trained the same weights as PPO")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lg, fg := twoHosts(t, w)
	l, done := connect(t, ctx, ctx, fg, "", feed.Options{})
	reinforceCalls.Store(0)
	dir, two := trainTwoStepsWith(t, lg, l, useIt)
	l.Close()
	if err := followerResult(t, done); err != nil {
		t.Fatalf("follower: %v", err)
	}
	if n := reinforceCalls.Load(); n != oneCalls {
		t.Fatalf("two hosts ran the objective on %d micro-batches, one backend on %d", n, oneCalls)
	}
	if one.Metrics["loss_tokens"] != two.Metrics["loss_tokens"] {
		t.Fatalf("loss tokens %v vs %v", one.Metrics["loss_tokens"], two.Metrics["loss_tokens"])
	}
	sameWeights(t, oneDir, dir, 2e-6)

	cfg := testConfig(t)
	cfg.Actor.Objective = "no_such_objective"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `unknown objective "no_such_objective"`) {
		t.Fatalf("unknown objective: %v", err)
	}
}
