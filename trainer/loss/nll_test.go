package loss

import (
	"math"
	"strings"
	"testing"
)

func TestNLL(t *testing.T) {
	cases := []struct {
		name       string
		k          int // sequences sharing the scored node
		logp       float32
		n          int64
		loss, grad float64
		err        string
	}{
		{name: "one token", k: 1, logp: -2, n: 1, loss: 2, grad: -1},
		{name: "normalised by the minibatch", k: 1, logp: -2, n: 4, loss: 0.5, grad: -0.25},
		// Three sequences' loss tokens on one node: counted three times, computed once.
		{name: "shared node", k: 3, logp: -1, n: 3, loss: 1, grad: -1},
		{name: "nan", k: 1, logp: float32(math.NaN()), n: 1, err: "log-prob"},
		{name: "bad normaliser", k: 1, logp: -1, n: 0, err: "normaliser"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mb := oneNode(c.k)
			l, d, refs, err := NLL(mb, []float32{0, c.logp}, c.n)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || math.Abs(l-c.loss) > 1e-6 || math.Abs(float64(d[1])-c.grad) > 1e-6 || d[0] != 0 || refs != int64(c.k) {
				t.Fatalf("loss %v grad %v refs %d err %v, want %v %v %d", l, d, refs, err, c.loss, c.grad, c.k)
			}
		})
	}
	if _, _, _, err := NLL(oneNode(1), []float32{0}, 1); err == nil {
		t.Fatal("short logp accepted")
	}
}

// TestBehavAbsDiff: the mismatch statistic counts masked tokens too.
func TestBehavAbsDiff(t *testing.T) {
	mb := oneNode(2)
	seqs := []Seq{
		{Offset: 1, Adv: []float32{1}, Behav: []float32{-1.5}}, // |prox − behav| = 0.5
		{Offset: 1, Adv: []float32{1}, Behav: []float32{-3}},   // 2, w = e² > 5: masked
	}
	var st Stats
	if _, _, err := DefaultConfig().Compute(mb, seqs, []float32{0, -1}, []float32{0, -1}, nil, 2, &st); err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.BehavAbsDiff()-1.25) > 1e-6 || st.CapFraction() != 0.5 {
		t.Fatalf("mismatch %v cap fraction %v, want 1.25 and 0.5", st.BehavAbsDiff(), st.CapFraction())
	}
}
