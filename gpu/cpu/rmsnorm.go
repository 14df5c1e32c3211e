package cpu

import "math"

// RMSNorm as Qwen3RMSNorm: y = x · rsqrt(mean(x²) + eps) · w over rows of width C. The mean of
// squares is accumulated in float64 and rsqrt taken in float64, then rounded to T: transformers
// upcasts to fp32 for this, so in fp32 the two agree to rounding.
//
// Backward: with r = (mean(x²)+eps)^(-1/2),
//   dx_j = r·w_j·dy_j − (r³/C)·x_j·Σ_i dy_i·w_i·x_i,   dw_i += dy_i·x_i·r.

// rmsnormForward writes out and the per-row rstd (saved for backward).
func rmsnormForward[T float](out, rstd, x, w []T, rows, C int, eps float64) {
	parallelFor(rows, grainFor(C), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := x[r*C : (r+1)*C]
			var ss float64
			for _, v := range xr {
				ss += float64(v) * float64(v)
			}
			s := T(1 / math.Sqrt(ss/float64(C)+eps))
			rstd[r] = s
			or := out[r*C : (r+1)*C]
			for i, v := range xr {
				or[i] = (v * s) * w[i]
			}
		}
	})
}

// rmsnormBackward accumulates dx += ∂/∂x and dw += ∂/∂w of Σ dout·y.
func rmsnormBackward[T float](dx, dw, dout, x, w, rstd []T, rows, C int) {
	// dx rows are independent; dw is a sum over rows, reduced per part in float64 then added.
	parts := make([][]float64, numParts(rows, grainFor(C)))
	parallelForPart(rows, grainFor(C), func(p, lo, hi int) {
		acc := make([]float64, C)
		for r := lo; r < hi; r++ {
			xr, dr := x[r*C:(r+1)*C], dout[r*C:(r+1)*C]
			s := float64(rstd[r])
			var dot float64
			for i := range C {
				dot += float64(dr[i]) * float64(w[i]) * float64(xr[i])
				acc[i] += float64(dr[i]) * float64(xr[i]) * s
			}
			k := s * s * s * dot / float64(C)
			dxr := dx[r*C : (r+1)*C]
			for i := range C {
				dxr[i] += T(s*float64(w[i])*float64(dr[i]) - k*float64(xr[i]))
			}
		}
		parts[p] = acc
	})
	for _, acc := range parts {
		for i, v := range acc {
			dw[i] += T(v)
		}
	}
}
