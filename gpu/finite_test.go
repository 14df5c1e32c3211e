package gpu

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"tau2rl/gpu/internal/par"
	"tau2rl/gpu/safetensors"
)

// The finiteness scans run over all cores, but their errors still name the first bad element
// of a tensor, wherever the bad values sit relative to the chunks the scan is split into.
func TestNonFiniteReportsFirstElement(t *testing.T) {
	n := 2*par.Grain + 5
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for _, tc := range []struct {
		bad  map[int]float32
		want int // -1: none
	}{
		{nil, -1},
		{map[int]float32{0: nan}, 0},
		{map[int]float32{n - 1: inf}, n - 1},
		{map[int]float32{par.Grain + 3: nan, 2*par.Grain + 1: inf}, par.Grain + 3},
		{map[int]float32{2*par.Grain + 1: nan, par.Grain - 1: float32(math.Inf(1))}, par.Grain - 1},
		{map[int]float32{7: math.Float32frombits(0x7f800001)}, 7}, // a signalling NaN
	} {
		v := make([]float32, n)
		for i := range v {
			v[i] = math.MaxFloat32 * float32(i%3-1) // the largest finite values are finite
		}
		v[1] = math.Float32frombits(1) // and so is a subnormal
		for i, x := range tc.bad {
			v[i] = x
		}
		if got := firstNonFinite(v); got != tc.want {
			t.Errorf("bad at %v: firstNonFinite = %d, want %d", tc.bad, got, tc.want)
		}
	}
	w, err := NewRandomWeights(TinyConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	w.Tensors[NameEmbed][100] = float32(math.Inf(1))
	w.Tensors[NameEmbed][5] = float32(math.NaN())
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), NameEmbed+"[5] = NaN") {
		t.Errorf("Check: %v, want the NaN at [5]", err)
	}
}

// ReadOptimizerStateTensor reports the first element breaking any of its rules (finite,
// non-negative second moment, zero moments at step 0), not the first of whichever rule its
// parallel scan tests first.
func TestOptimizerStateTensorFirstBadElement(t *testing.T) {
	n := 2*par.Grain + 9
	p := ParamSpec{Name: "w", Shape: []int{n}}
	for _, tc := range []struct {
		suffix string
		step   int
		bad    map[int]float32
		want   string // "" : accepted
	}{
		{SuffixExpAvgSq, 1, nil, ""},
		{SuffixExpAvgSq, 1, map[int]float32{par.Grain + 1: -1, 2*par.Grain + 2: float32(math.NaN())}, fmt.Sprintf("[%d] = -1: a second moment cannot be negative", par.Grain+1)},
		{SuffixExpAvgSq, 1, map[int]float32{par.Grain + 1: float32(math.Inf(1)), 2*par.Grain + 2: -1}, fmt.Sprintf("[%d] = +Inf is not finite", par.Grain+1)},
		{SuffixExpAvg, 1, map[int]float32{3: -1}, ""}, // a first moment may be negative
		{SuffixExpAvg, 0, map[int]float32{2*par.Grain + 8: 0.5}, fmt.Sprintf("[%d] = 0.5 at step 0", 2*par.Grain+8)},
		{SuffixMaster, 0, map[int]float32{4: 0.5}, ""}, // masters are nonzero at step 0
	} {
		t.Run(fmt.Sprintf("%s-step%d-%v", tc.suffix, tc.step, len(tc.bad)), func(t *testing.T) {
			v := make([]float32, n)
			if tc.step > 0 {
				for i := range v {
					v[i] = float32(i%7) * 1e-3
				}
			}
			for i, x := range tc.bad {
				v[i] = x
			}
			dir := t.TempDir()
			specs := []safetensors.TensorSpec{{Name: p.Name + tc.suffix, DType: safetensors.F32, Shape: p.Shape}}
			if _, err := safetensors.WriteDir(dir, specs, nil, 0, func(string) ([]float32, error) { return v, nil }); err != nil {
				t.Fatal(err)
			}
			f, err := safetensors.Open(filepath.Join(dir, safetensors.SingleFile))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ReadOptimizerStateTensor(f, p, tc.suffix, tc.step)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want == "" && len(got) != n:
				t.Fatalf("%d values, want %d", len(got), n)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
