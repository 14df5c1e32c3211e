//go:build cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"tau2rl/gpu"
)

// TestNewShardEqualsShard: a rank built sharded (NewShard) is the backend New followed by Shard
// gives — the same flat layout and shard, bf16 working weights, fp32 masters and (zero) moments
// bit for bit, and the same HeldBytes — for every rank of worlds 2 and 3 (3 leaves padding at the
// end of the last shard). Run on one GPU: the ranks are built one after another on device 0.
func TestNewShardEqualsShard(t *testing.T) {
	cfg := smallConfig()
	w := testWeights(t, cfg, 11)
	for _, world := range []int{2, 3} {
		for rank := range world {
			a, err := New(w, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			shA, err := a.Shard(rank, world)
			if err != nil {
				t.Fatal(err)
			}
			b, err := NewShard(w, DefaultOptions(), rank, world)
			if err != nil {
				t.Fatal(err)
			}
			shB, err := b.Shard(rank, world) // a no-op on a backend built as this rank
			if err != nil {
				t.Fatal(err)
			}
			if shA != shB {
				t.Fatalf("world %d rank %d: shard %+v vs %+v", world, rank, shA, shB)
			}
			if _, err := b.Shard((rank+1)%world, world); err == nil {
				t.Fatalf("world %d rank %d: became another rank", world, rank)
			}
			if !bitsEqual(weightsOf(t, a), weightsOf(t, b)) {
				t.Fatalf("world %d rank %d: bf16 working weights differ", world, rank)
			}
			stA, err := a.ShardState()
			if err != nil {
				t.Fatal(err)
			}
			stB, err := b.ShardState()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				x, y []float32
			}{{"master", stA.Master, stB.Master}, {"exp_avg", stA.ExpAvg, stB.ExpAvg}, {"exp_avg_sq", stA.ExpAvgSq, stB.ExpAvgSq}} {
				if len(c.x) != len(c.y) {
					t.Fatalf("world %d rank %d: %s has %d vs %d elements", world, rank, c.name, len(c.x), len(c.y))
				}
				for i := range c.x {
					if math.Float32bits(c.x[i]) != math.Float32bits(c.y[i]) {
						t.Fatalf("world %d rank %d: %s[%d] %v vs %v", world, rank, c.name, i, c.x[i], c.y[i])
					}
				}
			}
			if stA.Step != stB.Step || a.HeldBytes() != b.HeldBytes() {
				t.Fatalf("world %d rank %d: step %d vs %d, HeldBytes %d vs %d", world, rank, stA.Step, stB.Step, a.HeldBytes(), b.HeldBytes())
			}
			a.Close()
			b.Close()
		}
	}
	if _, err := NewShard(w, DefaultOptions(), 2, 2); err == nil {
		t.Fatal("rank 2 of 2 accepted")
	}
}

// TestShardStepLeavesGradientsStale: ShardStep leaves the gradient accumulator for the next Backward
// to overwrite (gradsStale), as Step does, instead of zeroing it. A rank that then runs no Backward
// (an idle data-parallel rank) must still add zeros to the reduce-scatter: GradBuffer zeroes the
// stale values. A rank that does run one must hold exactly that pass's gradients, as a fresh rank
// would. The raw buffer is read here, not Gradients(), which zeroes a stale buffer itself.
func TestShardStepLeavesGradientsStale(t *testing.T) {
	cfg := smallConfig()
	w := testWeights(t, cfg, 23)
	rng := rand.New(rand.NewPCG(5, 6))
	var trees []packed
	var dls [][]float32
	for range 2 {
		seqs := groupSequences(rng, cfg.VocabSize, 2, 2, 60, 25)
		p := buildTree(seqs)
		trees, dls = append(trees, p), append(dls, p.dlogp(seqWeights(rng, seqs)))
	}
	keep := gpu.Optimizer{LR: 0, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} // the weights stay as they are
	rank := func() *Backend {
		b, err := NewShard(w, DefaultOptions(), 0, 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	read := func(b *Backend) []float32 {
		buf, err := b.GradBuffer()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, buf.N)
		if err := b.enter(); err != nil {
			t.Fatal(err)
		}
		defer b.leave()
		if err := d2hF32(out, buf.Ptr); err != nil {
			t.Fatal(err)
		}
		return out
	}
	nonzero := func(x []float32) (n int) {
		for _, v := range x {
			if v != 0 {
				n++
			}
		}
		return n
	}

	b := rank()
	cudaFB(t, b, trees[0].mb, dls[0])
	if nonzero(read(b)) == 0 {
		t.Fatal("the backward pass wrote no gradient")
	}
	if err := b.ShardStep(keep, 1); err != nil {
		t.Fatal(err)
	}
	if n := nonzero(read(b)); n != 0 {
		t.Fatalf("an idle rank after ShardStep: GradBuffer has %d nonzero elements, want all zero", n)
	}

	cudaFB(t, b, trees[0].mb, dls[0])
	if err := b.ShardStep(keep, 1); err != nil {
		t.Fatal(err)
	}
	cudaFB(t, b, trees[1].mb, dls[1])
	fresh := rank()
	cudaFB(t, fresh, trees[1].mb, dls[1])
	got, want := read(b), read(fresh)
	if e := relErr(got, want); e > tolExactRel*100 || math.IsNaN(e) {
		t.Fatalf("the backward pass after ShardStep: relative error %.3g against a fresh rank's gradients", e)
	}
}
