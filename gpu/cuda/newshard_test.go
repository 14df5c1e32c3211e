//go:build cuda

package cuda

import (
	"math"
	"testing"
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
