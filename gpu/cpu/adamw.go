package cpu

import "math"

// Gradient clipping and AdamW with torch semantics:
//
//	torch.nn.utils.clip_grad_norm_: total = ‖g‖₂ over every parameter; coef = max_norm/(total+1e-6);
//	  g *= min(coef, 1). (The pre-clip total is what Step returns.)
//	torch.optim.AdamW (step t ≥ 1):
//	  θ ← θ·(1 − lr·wd)                      decoupled weight decay
//	  m ← β₁m + (1−β₁)g,   v ← β₂v + (1−β₂)g²
//	  θ ← θ − (lr/(1−β₁ᵗ)) · m / (√v/√(1−β₂ᵗ) + eps)

// globalNorm is the L2 norm of g, accumulated in float64.
func globalNorm[T float](g []T) float64 {
	sums := make([]float64, numParts(len(g), grainFor(1)))
	parallelForPart(len(g), grainFor(1), func(p, lo, hi int) {
		var s float64
		for _, v := range g[lo:hi] {
			s += float64(v) * float64(v)
		}
		sums[p] = s
	})
	var s float64
	for _, v := range sums {
		s += v
	}
	return math.Sqrt(s)
}

// clipScale is the factor clip_grad_norm_ multiplies gradients by (1 when maxNorm ≤ 0).
func clipScale(norm, maxNorm float64) float64 {
	if maxNorm <= 0 {
		return 1
	}
	return min(1, maxNorm/(norm+1e-6))
}

// adamwUpdate applies one AdamW step t (1-based) to params with gradients g (multiplied by
// gradScale first) and moments m, v, all of the same length.
func adamwUpdate[T float](params, g, m, v []T, gradScale float64, t int, lr, beta1, beta2, eps, wd float64) {
	bc1 := 1 - math.Pow(beta1, float64(t))
	bc2 := math.Sqrt(1 - math.Pow(beta2, float64(t)))
	step := lr / bc1
	decay := 1 - lr*wd
	parallelFor(len(params), grainFor(4), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gi := float64(g[i]) * gradScale
			mi := beta1*float64(m[i]) + (1-beta1)*gi
			vi := beta2*float64(v[i]) + (1-beta2)*gi*gi
			m[i], v[i] = T(mi), T(vi)
			p := float64(params[i]) * decay
			params[i] = T(p - step*float64(T(mi))/(math.Sqrt(float64(T(vi)))/bc2+eps))
		}
	})
}
