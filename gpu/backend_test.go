package gpu

import (
	"strings"
	"testing"
)

func tree() *MicroBatch {
	// 0 → 1 → {2, 3 → 4};  5 → 6
	return &MicroBatch{
		Tokens:     []int32{1, 2, 3, 4, 5, 6, 7},
		Positions:  []int32{0, 1, 2, 2, 3, 0, 1},
		Parent:     []int32{-1, 0, 1, 1, 3, -1, 5},
		SubtreeEnd: []int32{4, 4, 2, 4, 4, 6, 6},
	}
}

func TestMicroBatchValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*MicroBatch)
		vocab  int
		want   string
	}{
		{"ok", func(*MicroBatch) {}, 8, ""},
		{"no vocab bound", func(*MicroBatch) {}, 0, ""},
		{"empty", func(mb *MicroBatch) { *mb = MicroBatch{} }, 8, "empty"},
		{"lengths", func(mb *MicroBatch) { mb.Positions = mb.Positions[:3] }, 8, "lengths differ"},
		{"token range", func(mb *MicroBatch) { mb.Tokens[3] = 8 }, 8, "outside vocabulary"},
		{"negative token", func(mb *MicroBatch) { mb.Tokens[0] = -1 }, 0, "outside vocabulary"},
		{"forward parent", func(mb *MicroBatch) { mb.Parent[2] = 4 }, 8, "earlier node"},
		{"self parent", func(mb *MicroBatch) { mb.Parent[2] = 2 }, 8, "earlier node"},
		{"not pre-order", func(mb *MicroBatch) { mb.Parent[4] = 2; mb.Positions[4] = 3 }, 8, "pre-order"},
		{"closed subtree", func(mb *MicroBatch) { mb.Parent[6] = 0; mb.Positions[6] = 1 }, 8, "pre-order"},
		{"position", func(mb *MicroBatch) { mb.Positions[4] = 7 }, 8, "position"},
		{"negative position", func(mb *MicroBatch) { mb.Positions[0] = -1 }, 8, "negative position"},
		{"subtree end", func(mb *MicroBatch) { mb.SubtreeEnd[1] = 3 }, 8, "subtree_end"},
		{"leaf end", func(mb *MicroBatch) { mb.SubtreeEnd[2] = 4 }, 8, "subtree_end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mb := tree()
			tc.mutate(mb)
			err := mb.Validate(tc.vocab)
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestChain(t *testing.T) {
	mb := Chain([]int32{4, 5, 6})
	if err := mb.Validate(7); err != nil {
		t.Fatal(err)
	}
	if mb.Parent[0] != -1 || mb.Parent[2] != 1 || mb.SubtreeEnd[0] != 2 || mb.Positions[2] != 2 {
		t.Fatalf("%+v", mb)
	}
}

func TestDefaultOptimizer(t *testing.T) {
	o := DefaultOptimizer()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.LR != 1.7e-5 || o.WeightDecay != 0.017 || o.MaxGradNorm != 1 {
		t.Fatalf("%+v", o)
	}
	for _, bad := range []Optimizer{{LR: -1, Eps: 1}, {Beta1: 1, Eps: 1}, {Beta2: -0.1, Eps: 1}, {}, {Eps: 1, WeightDecay: -1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestParseDType(t *testing.T) {
	for in, want := range map[string]DType{"bf16": BF16, "bfloat16": BF16, "F16": F16, "float32": F32} {
		if got, err := ParseDType(in); err != nil || got != want {
			t.Errorf("ParseDType(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseDType("int4"); err == nil {
		t.Error("int4 accepted")
	}
}

// FuzzMicroBatchValidate: a micro-batch from arbitrary parent/position/end arrays is either
// rejected or satisfies the invariants the attention kernels rely on.
func FuzzMicroBatchValidate(f *testing.F) {
	mb := tree()
	enc := func(mb *MicroBatch) []byte {
		var b []byte
		for i := range mb.Tokens {
			b = append(b, byte(mb.Parent[i]+1), byte(mb.Positions[i]), byte(mb.SubtreeEnd[i]))
		}
		return b
	}
	f.Add(enc(mb))
	f.Add(enc(Chain([]int32{1, 2, 3})))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		n := len(b) / 3
		if n > 64 {
			return
		}
		mb := &MicroBatch{Tokens: make([]int32, n), Positions: make([]int32, n), Parent: make([]int32, n), SubtreeEnd: make([]int32, n)}
		for i := range n {
			mb.Parent[i] = int32(b[3*i]) - 1
			mb.Positions[i] = int32(b[3*i+1])
			mb.SubtreeEnd[i] = int32(b[3*i+2])
		}
		if mb.Validate(0) != nil {
			return
		}
		// Invariant: j ≤ i ≤ SubtreeEnd[j] holds exactly when j is i or an ancestor of i.
		for i := range n {
			anc := map[int]bool{i: true}
			for p := mb.Parent[i]; p >= 0; p = mb.Parent[p] {
				anc[int(p)] = true
			}
			for j := 0; j <= i; j++ {
				if vis := int(mb.SubtreeEnd[j]) >= i; vis != anc[j] {
					t.Fatalf("node %d key %d: mask says %v, ancestry says %v (%+v)", i, j, vis, anc[j], mb)
				}
			}
		}
	})
}
