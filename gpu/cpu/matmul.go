package cpu

// Matmul for torch Linear weights without bias: y[N,O] = x[N,I] · W[O,I]ᵀ. Every projection of
// Qwen3 (q/k/v/o, gate/up/down) and, chunked, the lm_head go through these two functions.
//
// Forward parallelizes over rows of x; the backward pass computes dx (parallel over rows) and dW
// (parallel over output features), so no two goroutines write the same memory.

// matmulForward sets out = x·Wᵀ.
func matmulForward[T float](out, x, w []T, N, I, O int) {
	parallelFor(N, grainFor(I*O), func(lo, hi int) {
		for n := lo; n < hi; n++ {
			xr := x[n*I : (n+1)*I]
			or := out[n*O : (n+1)*O]
			for o := range O {
				or[o] = dot(xr, w[o*I:(o+1)*I])
			}
		}
	})
}

// matmulBackward accumulates dx += dout·W and dw += doutᵀ·x. dx may be nil when the input needs
// no gradient.
func matmulBackward[T float](dx, dw, dout, x, w []T, N, I, O int) {
	if dx != nil {
		parallelFor(N, grainFor(I*O), func(lo, hi int) {
			for n := lo; n < hi; n++ {
				dr := dout[n*O : (n+1)*O]
				dxr := dx[n*I : (n+1)*I]
				for o, g := range dr {
					if g != 0 {
						axpy(g, w[o*I:(o+1)*I], dxr)
					}
				}
			}
		})
	}
	parallelFor(O, grainFor(N*I), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			dwr := dw[o*I : (o+1)*I]
			for n := range N {
				if g := dout[n*O+o]; g != 0 {
					axpy(g, x[n*I:(n+1)*I], dwr)
				}
			}
		}
	})
}
