package loss

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"tau2rl/trainer/prefixtree"
)

// Input is what an objective is computed from: one packed micro-batch of a (mini)batch and what
// the trainer knows about it. Every objective gets the same Input, so the trainers (trainer/step
// on one GPU, on several, on several hosts through trainer/feed; trainer/sft) call objectives
// without knowing which one runs.
type Input struct {
	// MB is the packed micro-batch: nodes in prefix-tree pre-order and the CSR loss references
	// (RefStart, RefSeq, RefTok) naming, per node, the (sequence, token) pairs it scores.
	MB *prefixtree.MicroBatch
	// Seqs holds each sequence's per-token advantages and behaviour log-probs, indexed by the
	// sequence ids of MB.RefSeq. Supervised objectives (NLL) read none and get nil.
	Seqs []Seq
	// Logp are the current policy's log-probs per node (gpu.Backend.Forward): what the gradient
	// is taken with respect to.
	Logp []float32
	// Prox are the proximal policy's log-probs per node (gpu.Backend.LogProbs before the update,
	// or Logp itself when actor.recompute_logprob is off). Nil in trainer/sft.
	Prox []float32
	// Entropy is the per-node entropy, for statistics only; may be nil.
	Entropy []float32
	// N is the normaliser: the loss tokens of the whole minibatch, so that the micro-batches'
	// losses and gradients add up to the minibatch's mean.
	N int64
}

// Result is an objective's answer for one micro-batch.
type Result struct {
	// Loss is the micro-batch's share of the minibatch loss (already divided by Input.N).
	Loss float64
	// DLogp is d Loss / d Logp per node, what gpu.Backend.Backward takes: the gradients' scale
	// per node, which the backend back-propagates through the model. Len = MB.Len(); nodes
	// without loss references carry 0.
	DLogp []float32
	// Stats are the micro-batch's statistics; callers merge them with Stats.Add (per rank, then
	// over ranks and hosts in a fixed order). Evaluate sets Stats.Loss to Loss.
	Stats Stats
}

// Objective is one training objective: a loss over a packed micro-batch and its gradient with
// respect to the per-node log-probs. Implementations are pure functions of their settings and
// Input (no state between calls): the data-parallel trainer calls one Objective from several
// ranks at once.
type Objective interface {
	// Name is the name the objective is registered under (actor.objective).
	Name() string
	// Compute evaluates in. Errors name what is wrong with in (a non-finite log-prob, a
	// reference outside its sequence's data); they fail the step.
	Compute(in Input) (Result, error)
}

// Factory builds an objective from the loss settings, validating the ones it reads.
type Factory func(Config) (Objective, error)

// The built-in objectives' names.
const (
	// ObjectivePPO is AReaL's decoupled PPO actor loss (Config.Compute): GRPO's objective, the
	// default.
	ObjectivePPO = "ppo"
	// ObjectiveNLL is the supervised negative log-likelihood (NLL): trainer/sft's objective.
	ObjectiveNLL = "nll"
)

var registry = struct {
	sync.RWMutex
	m map[string]Factory
}{m: map[string]Factory{}}

// Register makes an objective available under name (actor.objective: name). A new objective is
// one file in this package plus one line in registry.go; code outside it (a test, a fork's own
// objective) registers from its own init. It panics when name is empty, contains characters other
// than lower-case letters, digits and '_', or is taken: two objectives under one name is a
// programming error, found at start-up.
func Register(name string, f Factory) {
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		panic(fmt.Sprintf("loss: objective name %q: use lower-case letters, digits and '_'", name))
	}
	if f == nil {
		panic(fmt.Sprintf("loss: objective %q registered without a factory", name))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[name]; dup {
		panic(fmt.Sprintf("loss: objective %q registered twice", name))
	}
	registry.m[name] = f
}

// Names lists the registered objectives, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.m))
	for n := range registry.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New builds the objective c.Objective names ("" is ObjectivePPO) with c's settings.
func New(c Config) (Objective, error) {
	name := c.objective()
	registry.RLock()
	f, ok := registry.m[name]
	registry.RUnlock()
	if !ok {
		return nil, fmt.Errorf("loss: unknown objective %q (registered: %s)", name, strings.Join(Names(), ", "))
	}
	o, err := f(c)
	if err != nil {
		return nil, err
	}
	if o.Name() != name {
		return nil, fmt.Errorf("loss: objective registered as %q calls itself %q", name, o.Name())
	}
	return o, nil
}

// Evaluate runs o on in and checks the part of the contract every caller relies on: one gradient
// per node. It sets Result.Stats.Loss to Result.Loss, so an objective need not.
func Evaluate(o Objective, in Input) (Result, error) {
	r, err := o.Compute(in)
	if err != nil {
		return Result{}, err
	}
	if in.MB != nil && len(r.DLogp) != in.MB.Len() {
		return Result{}, fmt.Errorf("loss: objective %q returned %d gradients for %d nodes", o.Name(), len(r.DLogp), in.MB.Len())
	}
	r.Stats.Loss = r.Loss
	return r, nil
}
