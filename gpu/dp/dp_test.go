package dp

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"tau2rl/gpu"
	"tau2rl/gpu/collective"
	"tau2rl/gpu/cpu"
)

// randomTree returns a pre-order forest of n nodes: each node's parent is a random node of the
// current root path (or none, starting a new tree), so micro-batches have shared prefixes and
// uneven attention work, as the trainer's prefix-tree packing produces.
func randomTree(rng *rand.Rand, cfg gpu.Config, n int) *gpu.MicroBatch {
	mb := &gpu.MicroBatch{Tokens: make([]int32, n), Positions: make([]int32, n), Parent: make([]int32, n), SubtreeEnd: make([]int32, n)}
	var path []int32
	for i := range n {
		mb.Tokens[i] = int32(rng.IntN(cfg.VocabSize))
		if i == 0 || rng.IntN(8) == 0 {
			path = path[:0]
			mb.Parent[i] = -1
		} else {
			path = path[:1+rng.IntN(len(path))]
			mb.Parent[i] = path[len(path)-1]
			mb.Positions[i] = mb.Positions[mb.Parent[i]] + 1
		}
		path = append(path, int32(i))
	}
	for i := range n {
		mb.SubtreeEnd[i] = int32(i)
	}
	for i := n - 1; i >= 0; i-- {
		if p := mb.Parent[i]; p >= 0 && mb.SubtreeEnd[i] > mb.SubtreeEnd[p] {
			mb.SubtreeEnd[p] = mb.SubtreeEnd[i]
		}
	}
	if err := mb.Validate(cfg.VocabSize); err != nil {
		panic(err)
	}
	return mb
}

// stepData is one optimizer step's micro-batches and per-node loss weights.
type stepData struct {
	mbs     []*gpu.MicroBatch
	weights [][]float32
	tokens  int // the global normaliser: every node of every micro-batch
}

func makeStep(seed uint64, cfg gpu.Config, count int) stepData {
	rng := rand.New(rand.NewPCG(seed, 7))
	return makeStepWith(rng, cfg, count, func() int { return 4 + rng.IntN(20) })
}

// makeStepWith is makeStep with the micro-batch sizes drawn by size (called once per micro-batch,
// before its tree): the GPU tests use larger, uneven sizes.
func makeStepWith(rng *rand.Rand, cfg gpu.Config, count int, size func() int) stepData {
	var d stepData
	for range count {
		mb := randomTree(rng, cfg, size())
		w := make([]float32, mb.Len())
		for i := range w {
			w[i] = float32(rng.IntN(5)-2) / 2
		}
		d.mbs, d.weights = append(d.mbs, mb), append(d.weights, w)
		d.tokens += mb.Len()
	}
	return d
}

// lossGrad is the test's loss: Σ w·logp + ½Σ logp² over the micro-batch, normalised by the global
// token count (the trainer's loss-token normaliser), so dlogp depends on the forward's log-probs.
func (d stepData) lossGrad(i int, logp []float32) (float64, []float32) {
	dl := make([]float32, len(logp))
	var l float64
	for c, lp := range logp {
		w := d.weights[i][c]
		l += (float64(w)*float64(lp) + 0.5*float64(lp)*float64(lp)) / float64(d.tokens)
		dl[c] = (w + lp) / float32(d.tokens)
	}
	return l, dl
}

var testOpt = func() gpu.Optimizer {
	o := gpu.DefaultOptimizer()
	o.LR = 1e-2
	o.MaxGradNorm = 0.05 // clipping active: the global norm must be the same
	return o
}()

// stepOne runs d on a single plain backend, micro-batch by micro-batch.
func stepOne(t *testing.T, be gpu.Backend, d stepData) (loss, norm float64) {
	t.Helper()
	loss = forwardBackwardOne(t, be, d)
	norm, err := be.Step(testOpt)
	if err != nil {
		t.Fatal(err)
	}
	return loss, norm
}

// forwardBackwardOne accumulates d's gradients on one backend and returns its loss.
func forwardBackwardOne(t *testing.T, be gpu.Backend, d stepData) (loss float64) {
	t.Helper()
	for i, mb := range d.mbs {
		lp, _, err := be.Forward(mb)
		if err != nil {
			t.Fatal(err)
		}
		l, dl := d.lossGrad(i, lp)
		loss += l
		if err := be.Backward(dl); err != nil {
			t.Fatal(err)
		}
	}
	return loss
}

// stepGroup runs d over the group's ranks; per-rank losses are added in rank order.
func stepGroup(t *testing.T, g *Group, d stepData) (loss, norm float64) {
	t.Helper()
	a := g.Assign(d.mbs)
	perRank := make([]float64, g.World())
	err := g.ForwardBackwardParallel(d.mbs, a, func(rank, i int, logp, _ []float32) ([]float32, error) {
		l, dl := d.lossGrad(i, logp)
		perRank[rank] += l
		return dl, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range perRank {
		loss += l
	}
	norm, err = g.Step(testOpt)
	if err != nil {
		t.Fatal(err)
	}
	return loss, norm
}

func newCPU(t *testing.T, w *gpu.Weights) *cpu.Backend {
	t.Helper()
	b, err := cpu.New(w)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newGroup builds an n-rank in-process group of cpu backends holding w.
func newGroup(t *testing.T, w *gpu.Weights, n int, opts ...Options) *Group {
	t.Helper()
	comms, err := collective.NewLocal(n)
	if err != nil {
		t.Fatal(err)
	}
	bes := make([]gpu.Backend, n)
	for r := range bes {
		bes[r] = newCPU(t, w)
	}
	g, err := New(bes, comms, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func weightsOf(t *testing.T, we gpu.WeightExporter) *gpu.Weights {
	t.Helper()
	w, err := we.Weights()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// maxDiff is the largest |a−b| over every parameter, and where.
func maxDiff(a, b *gpu.Weights) (float64, string) {
	var worst float64
	where := ""
	for _, s := range gpu.ParamSpecs(a.Config) {
		x, y := a.Tensors[s.Name], b.Tensors[s.Name]
		for i := range x {
			if d := math.Abs(float64(x[i]) - float64(y[i])); d > worst || math.IsNaN(d) {
				worst, where = d, fmt.Sprintf("%s[%d] %v vs %v", s.Name, i, x[i], y[i])
			}
		}
	}
	return worst, where
}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*max(math.Abs(a), math.Abs(b), 1e-12) }

// TestNRanksEqualOneRank: two optimizer steps over N = 2, 3, 4 in-process ranks give the loss,
// the gradient norm and the weights of the same two steps on one backend — with uneven
// micro-batch counts per rank, with fewer micro-batches than ranks (idle ranks), and with and
// without parameter sharding. With it, each rank's own buffer holds only its shard between passes
// (zeros elsewhere), so a pass that missed a gather could not reproduce the 1-rank numbers.
func TestNRanksEqualOneRank(t *testing.T) {
	cfg := gpu.TinyConfig()
	w0, err := gpu.NewRandomWeights(cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	for _, params := range []bool{false, true} {
		for _, tc := range []struct {
			ranks, mbs int
		}{{2, 7}, {3, 7}, {4, 7}, {4, 2}, {3, 10}} {
			t.Run(fmt.Sprintf("ranks=%d/mbs=%d/shard_parameters=%v", tc.ranks, tc.mbs, params), func(t *testing.T) {
				steps := []stepData{makeStep(1, cfg, tc.mbs), makeStep(2, cfg, tc.mbs+1)}
				one := newCPU(t, w0)
				g := newGroup(t, w0, tc.ranks, Options{ShardParameters: params})
				counts := map[int]bool{}
				for _, idx := range g.Assign(steps[0].mbs) {
					counts[len(idx)] = true
				}
				if tc.mbs%tc.ranks != 0 && len(counts) < 2 {
					t.Fatalf("assignment %v is even; the case wants uneven counts", g.Assign(steps[0].mbs))
				}
				for k, d := range steps {
					l1, n1 := stepOne(t, one, d)
					lN, nN := stepGroup(t, g, d)
					if !near(l1, lN, 1e-5) || !near(n1, nN, 1e-5) {
						t.Fatalf("step %d: 1 rank loss %.9g norm %.9g; %d ranks loss %.9g norm %.9g", k, l1, n1, tc.ranks, lN, nN)
					}
					if d, where := maxDiff(weightsOf(t, one), weightsOf(t, g)); d > 2e-6 {
						t.Fatalf("step %d: weights differ by %g at %s", k, d, where)
					}
				}
				ref := weightsOf(t, one)
				for r, be := range g.Backends() {
					held := weightsOf(t, be.(gpu.WeightExporter))
					if !params {
						// Every rank holds the same full weights after the all-gather.
						if d, where := maxDiff(ref, held); d > 2e-6 {
							t.Fatalf("rank %d: weights differ by %g at %s", r, d, where)
						}
						continue
					}
					if kept, total := nonZero(held), nonZero(ref); kept > total/tc.ranks+1 {
						t.Fatalf("rank %d holds %d of %d weights between passes; its shard is ≤ %d", r, kept, total, total/tc.ranks+1)
					}
				}
			})
		}
	}
}

func nonZero(w *gpu.Weights) int {
	n := 0
	for _, x := range w.Tensors {
		for _, v := range x {
			if v != 0 {
				n++
			}
		}
	}
	return n
}

// TestGroupIsABackend: Forward/Backward through the gpu.Backend interface (first rank only; the
// others join its gathers when parameters are sharded) and the collective Step give the
// one-backend step.
func TestGroupIsABackend(t *testing.T) {
	cfg := gpu.TinyConfig()
	w0, _ := gpu.NewRandomWeights(cfg, 5)
	d := makeStep(3, cfg, 3)
	one := newCPU(t, w0)
	l1, n1 := stepOne(t, one, d)
	for _, params := range []bool{false, true} {
		g := newGroup(t, w0, 3, Options{ShardParameters: params})
		lN, nN := stepOne(t, g, d)
		if !near(l1, lN, 1e-6) || !near(n1, nN, 1e-6) {
			t.Fatalf("shard_parameters=%v: loss %v/%v norm %v/%v", params, l1, lN, n1, nN)
		}
		if diff, where := maxDiff(weightsOf(t, one), weightsOf(t, g)); diff > 2e-6 {
			t.Fatalf("shard_parameters=%v: weights differ by %g at %s", params, diff, where)
		}
	}
}

// TestFailedRankDoesNotHangTheOthers: with sharded parameters a rank whose loss fails leaves the
// others inside a gather; the group must fail them all (and refuse later calls), not hang.
func TestFailedRankDoesNotHangTheOthers(t *testing.T) {
	cfg := gpu.TinyConfig()
	w0, _ := gpu.NewRandomWeights(cfg, 5)
	g := newGroup(t, w0, 3, Options{ShardParameters: true})
	d := makeStep(4, cfg, 6)
	err := g.ForwardBackwardParallel(d.mbs, g.Assign(d.mbs), func(rank, i int, logp, _ []float32) ([]float32, error) {
		if rank == 1 {
			return nil, fmt.Errorf("bad micro-batch")
		}
		_, dl := d.lossGrad(i, logp)
		return dl, nil
	})
	if err == nil || !strings.Contains(err.Error(), "bad micro-batch") {
		t.Fatalf("err = %v", err)
	}
	if _, err := g.Step(testOpt); err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Fatalf("step after a failed collective pass: %v", err)
	}
}

func TestNonFiniteNormSkipsTheStep(t *testing.T) {
	cfg := gpu.TinyConfig()
	w0, _ := gpu.NewRandomWeights(cfg, 5)
	g := newGroup(t, w0, 2)
	before := weightsOf(t, g)
	d := makeStep(3, cfg, 2)
	a := g.Assign(d.mbs)
	err := g.ForwardBackwardParallel(d.mbs, a, func(rank, i int, logp, _ []float32) ([]float32, error) {
		dl := make([]float32, len(logp))
		for c := range dl {
			dl[c] = 3e38 // finite, but the squared norm overflows
		}
		return dl, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Step(testOpt); err == nil {
		t.Fatal("a step with an infinite gradient norm succeeded")
	}
	if diff, where := maxDiff(before, weightsOf(t, g)); diff != 0 {
		t.Fatalf("weights changed by %g at %s", diff, where)
	}
	// The group is still usable and the gradients were zeroed: a clean step works.
	if _, n := stepGroup(t, g, d); n == 0 || math.IsInf(n, 0) {
		t.Fatalf("norm after the skipped step %v", n)
	}
}

func TestAssignBalancesCost(t *testing.T) {
	cfg := gpu.TinyConfig()
	d := makeStep(9, cfg, 13)
	for _, world := range []int{1, 2, 3, 4, 5} {
		a := Assign(cfg, d.mbs, world)
		seen := map[int]bool{}
		load := make([]float64, world)
		var total, biggest float64
		for r, idx := range a {
			for _, i := range idx {
				if seen[i] {
					t.Fatalf("micro-batch %d assigned twice", i)
				}
				seen[i] = true
				c := Cost(cfg, d.mbs[i])
				load[r] += c
				total += c
				biggest = max(biggest, c)
			}
		}
		if len(seen) != len(d.mbs) {
			t.Fatalf("world %d: %d of %d micro-batches assigned", world, len(seen), len(d.mbs))
		}
		// LPT bound: no rank exceeds the mean load by more than the largest single item.
		for r, l := range load {
			if l > total/float64(world)+biggest {
				t.Fatalf("world %d rank %d: load %v, mean %v, largest item %v", world, r, l, total/float64(world), biggest)
			}
		}
	}
	// Attention work counts: a deep chain costs more than a flat forest of the same tokens.
	chain := gpu.Chain(make([]int32, 64))
	flat := &gpu.MicroBatch{Tokens: make([]int32, 64), Positions: make([]int32, 64), Parent: make([]int32, 64), SubtreeEnd: make([]int32, 64)}
	for i := range 64 {
		flat.Parent[i], flat.SubtreeEnd[i] = -1, int32(i)
	}
	if Cost(cfg, chain) <= Cost(cfg, flat) {
		t.Fatalf("chain cost %v ≤ flat cost %v", Cost(cfg, chain), Cost(cfg, flat))
	}
}

// TestAbortFreesRanksWaitingForAnotherHost: a group driving ranks 0 and 1 of a 4-rank world
// whose other two ranks never come (their host is gone) waits in the step's reduce-scatter until
// Abort, from another goroutine, fails it with the cause; the group is unusable afterwards.
func TestAbortFreesRanksWaitingForAnotherHost(t *testing.T) {
	w0, _ := gpu.NewRandomWeights(gpu.TinyConfig(), 5)
	comms, err := collective.NewLocal(4)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New([]gpu.Backend{newCPU(t, w0), newCPU(t, w0)}, comms[:2])
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	go func() {
		time.Sleep(20 * time.Millisecond)
		g.Abort(errors.New("host 1 is gone"))
	}()
	if _, err := g.Step(testOpt); err == nil || !strings.Contains(err.Error(), "host 1 is gone") {
		t.Fatalf("step: %v", err)
	}
	if _, err := g.Step(testOpt); err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Fatalf("step after abort: %v", err)
	}
}
