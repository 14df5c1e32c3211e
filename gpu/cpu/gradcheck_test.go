package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Helpers shared by the operation tests: every backward function is checked against central
// finite differences of a scalar loss L = Σ out·R (R random), computed in float64.

func randVec(rng *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * rng.NormFloat64()
	}
	return v
}

func weightedSum(out, r []float64) float64 {
	var s float64
	for i := range out {
		s += out[i] * r[i]
	}
	return s
}

// checkGrad compares analytic[i] with (loss(x+h·e_i) − loss(x−h·e_i))/2h for every i.
func checkGrad(t *testing.T, name string, x, analytic []float64, loss func() float64) {
	t.Helper()
	if len(x) != len(analytic) {
		t.Fatalf("%s: %d values, %d gradients", name, len(x), len(analytic))
	}
	const h = 1e-5
	worst := 0.0
	for i := range x {
		save := x[i]
		x[i] = save + h
		lp := loss()
		x[i] = save - h
		lm := loss()
		x[i] = save
		num := (lp - lm) / (2 * h)
		err := math.Abs(num - analytic[i])
		if tol := 1e-7 + 1e-6*math.Abs(num); err > tol {
			t.Errorf("%s[%d]: analytic %.10g, finite difference %.10g (|diff| %.3g)", name, i, analytic[i], num, err)
			if t.Failed() && i > 20 {
				return
			}
		}
		worst = max(worst, err)
	}
	t.Logf("%s: %d gradients, worst |analytic − numeric| = %.3g", name, len(x), worst)
}

// allNonZero guards against a vacuous check: a gradient that is all zero would "match" a loss
// that does not depend on x.
func allNonZero(t *testing.T, name string, g []float64) {
	t.Helper()
	for _, v := range g {
		if v != 0 {
			return
		}
	}
	t.Fatalf("%s: gradient is identically zero", name)
}

func assertClose(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", name, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %.10g, want %.10g", name, i, got[i], want[i])
		}
	}
}
