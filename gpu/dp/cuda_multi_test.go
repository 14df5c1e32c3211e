//go:build cuda

package dp

// The N-GPU side of gpu/dp (issue 16): two GPUs through NCCL take the steps one GPU takes, and
// resume from their sharded checkpoint on two GPUs and on one. Skipped below two CUDA devices;
// run with `bash gpu/dp/device-test.sh multi` (docs/MULTIGPU.md).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"tau2rl/gpu"
	"tau2rl/gpu/cuda"
)

// multiConfig is a Qwen3 shape with the real widths of Qwen3-0.6B (hidden 1024, SwiGLU 3072, 16
// query and 8 KV heads of 128, q width ≠ hidden), 4 layers, a 16k vocabulary and untied embeddings
// (as Qwen3-8B): 96 M parameters, seconds on a GPU, the same kernels and GEMM shapes as the real
// model, and many shards' worth of elements in every tensor class.
func multiConfig() gpu.Config {
	c := gpu.Qwen3_0_6B()
	c.VocabSize, c.NumHiddenLayers, c.MaxPositionEmbeddings = 16384, 4, 4096
	c.TieWordEmbeddings = false
	return c
}

// multiSteps are three optimizer steps of prefix-tree micro-batches of uneven sizes: by cost, one
// rank of two gets the largest micro-batch alone and the other the rest, so ranks run different
// numbers of micro-batches.
func multiSteps(cfg gpu.Config) []stepData {
	var steps []stepData
	for k, sizes := range [][]int{{700, 260, 230, 190, 120}, {640, 300, 210, 150}, {760, 280, 200, 170, 90, 60}} {
		rng := rand.New(rand.NewPCG(uint64(100+k), 7))
		i := 0
		steps = append(steps, makeStepWith(rng, cfg, len(sizes), func() int { i++; return sizes[i-1] }))
	}
	return steps
}

// Tolerances of the two-GPU step against the one-GPU step. Both run the same kernels on the same
// bf16 working weights; what differs is the order of fp32 additions: the micro-batches' gradients
// summed in one accumulator or in two rank accumulators added by NCCL's reduce-scatter, and the
// embedding and RMSNorm weight gradients, which add with fp32 atomics in a run-to-run order anyway
// (the attention backward is the deterministic variant). Each is a relative change of about 1e-7
// in a gradient element. So:
//   - loss and gradient norm: relative 1e-3, a quarter of bf16's relative precision (2^-8). A
//     micro-batch dropped, doubled or run on stale weights, or a wrong loss normaliser, moves the
//     norm by tens of percent.
//   - the summed gradient itself, before the optimizer: per tensor, ‖g₂ − g₁‖ ≤ 1e-2·‖g₁‖, against
//     a one-GPU backend on the same bf16 weights (the plain run on the first step; from the second
//     on, a backend built from the group's working weights), so the difference is summation order
//     (3e-7 measured on two H200s). Against the plain run itself it is not: from the second step a
//     last-bit difference in a master can round its bf16 working copy the other way (one element in
//     a hundred after step 1 on the H100), and on two H200s that moved layer 1's q_proj gradient by
//     1.2e-2 at step 2. A wrong or missing contribution moves a tensor's gradient by O(1).
//   - fp32 master weights after the first step: |Δ| ≤ LR/4 per element. AdamW moves every element
//     with a gradient well above eps by about LR whatever the gradient's size, so a wrong
//     gradient, a shard applied at the wrong offset or a missing all-gather shows as Δ ≈ LR…2·LR.
//   - after later steps: at most 10% of the elements by more than LR/2 (a wrong step moves about
//     80% that far). Not a per-element bound: AdamW divides each element's update by its own
//     gradient scale, so where a gradient nearly cancels, the ~1e-4 changes above can flip its
//     update's sign. The first two-H100 run saw exactly that: step 1 within 1.6e-6 of the
//     one-GPU masters, step 2 with 3.6 M of 96 M elements more than LR/100 apart (at most 1.46·LR)
//     while loss and norm agreed to 1e-4, identically in two runs.
//   - bf16 working weights: every rank the same bits (the all-gather), each within one bf16 unit
//     in the last place (2^-7 relative, the bound of a rounding boundary crossed) of the rank's
//     own fp32 masters rounded, plus the master tolerance.
const (
	multiLossRel   = 1e-3
	multiGradRel   = 1e-2
	multiMasterAbs = 0.25 // × testOpt.LR, first step
	multiMovedFrac = 0.10 // of the elements by more than LR/2, later steps
)

// compareStep checks the group's loss, norm, fp32 masters and working weights after a step
// against a reference run's (ref: its fp32 masters) after the same step; first says whether both
// started from the same weights bit for bit (the per-element master bound applies).
func compareStep(t *testing.T, what string, first bool, l1, n1 float64, ref *gpu.Weights, lg, ng float64, g *Group) {
	t.Helper()
	if !near(l1, lg, multiLossRel) || !near(n1, ng, multiLossRel) {
		t.Fatalf("%s: reference loss %.9g norm %.9g; %d GPUs loss %.9g norm %.9g", what, l1, n1, g.World(), lg, ng)
	}
	masters := shardMaster(t, g)
	d, where := maxDiff(ref, masters)
	moved, far := movedBy(ref, masters, testOpt.LR/100), movedBy(ref, masters, testOpt.LR/2)
	t.Logf("%s: loss %.9g vs %.9g (rel %.2g), norm %.9g vs %.9g (rel %.2g); fp32 masters max |Δ| %.3g (%.3g·LR), %d elements differ by > LR/100, %d by > LR/2",
		what, l1, lg, relDiff(l1, lg), n1, ng, relDiff(n1, ng), d, d/testOpt.LR, moved, far)
	switch n := g.cfg.NumParams(); {
	case first && d > multiMasterAbs*testOpt.LR:
		t.Fatalf("%s: fp32 masters differ by %g (> %g·LR) at %s", what, d, multiMasterAbs, where)
	case !first && float64(far) > multiMovedFrac*float64(n):
		t.Fatalf("%s: %d of %d fp32 masters differ by more than LR/2 (> %g of them; largest %g at %s)", what, far, n, multiMovedFrac, d, where)
	}
	checkWorkingWeights(t, what, g, masters)
}

// gradients is what Gradients returns: a backend's fp32 gradient accumulator by tensor.
type gradients interface {
	Gradients() (map[string][]float32, error)
}

// compareGrads checks, before the optimizer step, that the ranks' gradient accumulators add up to
// the one-GPU backend's (multiGradRel per tensor, relative L2) and logs the worst tensor.
func compareGrads(t *testing.T, what string, plain *cuda.Backend, g *Group) {
	t.Helper()
	ref, err := plain.Gradients()
	if err != nil {
		t.Fatal(err)
	}
	sum := map[string][]float64{}
	for _, be := range g.Backends() {
		gr, err := be.(gradients).Gradients()
		if err != nil {
			t.Fatal(err)
		}
		for name, x := range gr {
			acc := sum[name]
			if acc == nil {
				acc = make([]float64, len(x))
				sum[name] = acc
			}
			for i, v := range x {
				acc[i] += float64(v)
			}
		}
	}
	worst, worstName := 0.0, ""
	for _, s := range gpu.ParamSpecs(g.cfg) {
		var dd, rr float64
		for i, v := range ref[s.Name] {
			e := sum[s.Name][i] - float64(v)
			dd += e * e
			rr += float64(v) * float64(v)
		}
		rel := math.Sqrt(dd / max(rr, 1e-300))
		if rel > worst {
			worst, worstName = rel, s.Name
		}
		if rel > multiGradRel {
			t.Fatalf("%s: the ranks' gradients of %s add up to within %.3g (relative L2) of the one-GPU gradient, want ≤ %g", what, s.Name, rel, multiGradRel)
		}
	}
	t.Logf("%s: summed gradients vs one GPU: worst tensor %s, relative L2 %.3g", what, worstName, worst)
}

// stepBoth takes one step of d on the one-GPU backend and on the group, comparing the gradients
// before the optimizer and everything after it.
func stepBoth(t *testing.T, what string, first bool, plain *cuda.Backend, g *Group, d stepData) {
	t.Helper()
	l1 := forwardBackwardOne(t, plain, d)
	a := g.Assign(d.mbs)
	perRank := make([]float64, g.World())
	if err := g.ForwardBackwardParallel(d.mbs, a, func(rank, i int, logp, _ []float32) ([]float32, error) {
		l, dl := d.lossGrad(i, logp)
		perRank[rank] += l
		return dl, nil
	}); err != nil {
		t.Fatal(err)
	}
	if first {
		compareGrads(t, what, plain, g)
	} else {
		// The two runs' weights now differ by rounding (see the tolerances), so the group's summed
		// gradients are checked against a one-GPU backend built from the group's own bf16 working
		// weights: the same function of the same weights, only the summation order differs.
		func() {
			same := newCUDA(t, weightsOf(t, g.Backends()[0].(gpu.WeightExporter)), 0)
			defer same.Close()
			forwardBackwardOne(t, same, d)
			compareGrads(t, what+", one GPU from the group's weights", same, g)
		}()
	}
	n1, err := plain.Step(testOpt)
	if err != nil {
		t.Fatal(err)
	}
	ng, err := g.Step(testOpt)
	if err != nil {
		t.Fatal(err)
	}
	var lg float64
	for _, l := range perRank {
		lg += l
	}
	compareStep(t, what, first, l1, n1, weightsOf(t, plain), lg, ng, g)
}

// checkWorkingWeights: every local rank holds the same bf16 working weights, within one bf16 ulp
// of the group's fp32 masters rounded to nearest even.
func checkWorkingWeights(t *testing.T, what string, g *Group, masters *gpu.Weights) {
	t.Helper()
	bes := g.Backends()
	first := weightsOf(t, bes[0].(gpu.WeightExporter))
	for r, be := range bes[1:] {
		if w := weightsOf(t, be.(gpu.WeightExporter)); !bitEqual(first, w) {
			d, where := maxDiff(first, w)
			t.Fatalf("%s: rank %d's bf16 weights differ from rank 0's by %g at %s (the all-gather)", what, r+1, d, where)
		}
	}
	rounded := roundBF16(masters)
	off := 0
	for _, s := range gpu.ParamSpecs(g.cfg) {
		x, y := first.Tensors[s.Name], rounded.Tensors[s.Name]
		for i := range x {
			if x[i] == y[i] {
				continue
			}
			off++
			if d := math.Abs(float64(x[i] - y[i])); d > math.Abs(float64(y[i]))/128 {
				t.Fatalf("%s: bf16 weight %s[%d] = %v, its master rounds to %v", what, s.Name, i, x[i], y[i])
			}
		}
	}
	if off > 0 {
		t.Logf("%s: %d bf16 working weights are one rounding step from their masters rounded", what, off)
	}
}

func relDiff(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(a), math.Abs(b), 1e-300) }

// movedBy counts the elements where a and b differ by more than tol.
func movedBy(a, b *gpu.Weights, tol float64) int {
	n := 0
	for _, s := range gpu.ParamSpecs(a.Config) {
		x, y := a.Tensors[s.Name], b.Tensors[s.Name]
		for i := range x {
			if math.Abs(float64(x[i])-float64(y[i])) > tol {
				n++
			}
		}
	}
	return n
}

// TestNCCLTwoGPUsEqualOneGPU: two optimizer steps of a data-parallel group over GPUs 0 and 1
// (NCCL reduce-scatter of the gradients, all-reduce of the norm, AdamW on each rank's shard, bf16
// all-gather; ranks with different micro-batch counts) equal the same steps of the plain one-GPU
// CUDA backend within the tolerances above. Then the two ranks' sharded checkpoint resumes on two
// GPUs and on one (the two shards re-sliced into one): the restored state is the saved one bit for
// bit, and step three equals the uninterrupted group's (and the one-GPU backend's) within the
// tolerances.
func TestNCCLTwoGPUsEqualOneGPU(t *testing.T) {
	needDevices(t, 2)
	cfg := multiConfig()
	w0, err := gpu.NewRandomWeights(cfg, 2026)
	if err != nil {
		t.Fatal(err)
	}
	steps := multiSteps(cfg)
	for k, d := range steps {
		a := Assign(cfg, d.mbs, 2)
		if len(a[0]) == len(a[1]) {
			t.Fatalf("step %d: assignment %v is even; the test wants uneven micro-batch counts", k+1, a)
		}
		t.Logf("step %d: %d micro-batches, %d tokens; rank 0 runs %v, rank 1 runs %v", k+1, len(d.mbs), d.tokens, a[0], a[1])
	}
	plain := newCUDA(t, w0, 0)
	defer plain.Close()
	g := ncclGroup(t, w0, 0, 1)
	for k, d := range steps[:2] {
		stepBoth(t, fmt.Sprintf("step %d", k+1), k == 0, plain, g, d)
		if k == 0 {
			t.Logf("step 1 moved %d of %d one-GPU master elements by more than LR/2 (what a wrong step would disturb)",
				movedBy(w0, weightsOf(t, plain), testOpt.LR/2), cfg.NumParams())
		}
	}

	dir := filepath.Join(t.TempDir(), "step2")
	saveCheckpoint(t, g, dir, gpu.BF16)
	for r := range 2 {
		if _, err := os.Stat(filepath.Join(dir, ShardFile(r, 2))); err != nil {
			t.Fatalf("sharded checkpoint: %v", err)
		}
	}
	saved := stateOf(t, g)
	want, wantNorm := stepGroup(t, g, steps[2])
	wantMasters := shardMaster(t, g)
	l1, n1 := stepOne(t, plain, steps[2])
	compareStep(t, "step 3, two GPUs uninterrupted vs one GPU", false, l1, n1, weightsOf(t, plain), want, wantNorm, g)

	// Resuming restores the state exactly (masters, moments, step count, bf16 weights: bit for
	// bit, re-sliced into one shard on one GPU); the step after it equals the uninterrupted step
	// within the tolerances. Not bit for bit: the embedding and RMSNorm weight gradients add with
	// fp32 atomics, whose order varies from run to run on micro-batches this size.
	for _, devs := range [][]int{{0, 1}, {0}} {
		r := resumeNCCL(t, dir, devs...)
		if diff := saved.diff(stateOf(t, r)); diff != "" {
			t.Fatalf("resumed on %d GPUs: the optimizer state is not the saved one: %s", len(devs), diff)
		}
		got, gotNorm := stepGroup(t, r, steps[2])
		compareStep(t, fmt.Sprintf("step 3 resumed on %d GPUs vs uninterrupted on 2", len(devs)), false, want, wantNorm, wantMasters, got, gotNorm, r)
		t.Logf("resumed on %d GPUs: masters bit for bit the uninterrupted run's: %v", len(devs), bitEqual(wantMasters, shardMaster(t, r)))
		r.Close() // give the devices' memory back before the next group
	}
}

// groupState is a group's whole optimizer state, each local rank's shard at its flat offset, and
// its bf16 working weights.
type groupState struct {
	master, expAvg, expAvgSq []float32
	steps                    []int
	weights                  *gpu.Weights
}

func stateOf(t *testing.T, g *Group) groupState {
	t.Helper()
	n := g.layout.Len
	s := groupState{master: make([]float32, n), expAvg: make([]float32, n), expAvgSq: make([]float32, n), weights: weightsOf(t, g)}
	for _, r := range g.ranks {
		st, err := r.sh.ShardState()
		if err != nil {
			t.Fatal(err)
		}
		if lo := r.shard.Lo; lo < n {
			copy(s.master[lo:], st.Master)
			copy(s.expAvg[lo:], st.ExpAvg)
			copy(s.expAvgSq[lo:], st.ExpAvgSq)
		}
		s.steps = append(s.steps, st.Step)
	}
	return s
}

// diff names the first difference between two states ("" when bit for bit the same).
func (a groupState) diff(b groupState) string {
	for _, st := range b.steps {
		if st != a.steps[0] {
			return fmt.Sprintf("step counts %v vs %v", a.steps, b.steps)
		}
	}
	for _, c := range []struct {
		name string
		x, y []float32
	}{{"master", a.master, b.master}, {"exp_avg", a.expAvg, b.expAvg}, {"exp_avg_sq", a.expAvgSq, b.expAvgSq}} {
		for i := range c.x {
			if math.Float32bits(c.x[i]) != math.Float32bits(c.y[i]) {
				return fmt.Sprintf("%s[%d] %v vs %v", c.name, i, c.x[i], c.y[i])
			}
		}
	}
	if !bitEqual(a.weights, b.weights) {
		d, where := maxDiff(a.weights, b.weights)
		return fmt.Sprintf("bf16 weights differ by %g at %s", d, where)
	}
	return ""
}
