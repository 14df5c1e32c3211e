package cpu

import "math"

// Qwen3MLP's activation: h = silu(gate)·up with silu(g) = g·σ(g).
// Backward: dgate = dh·up·σ(g)·(1 + g·(1−σ(g))),  dup = dh·silu(g).

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// swigluForward sets h = silu(g)·u elementwise over n values.
func swigluForward[T float](h, g, u []T, n int) {
	parallelFor(n, grainFor(4), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x := float64(g[i])
			h[i] = T(x*sigmoid(x)) * u[i]
		}
	})
}

// swigluBackward accumulates dg and du from dh.
func swigluBackward[T float](dg, du, dh, g, u []T, n int) {
	parallelFor(n, grainFor(4), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x := float64(g[i])
			s := sigmoid(x)
			dg[i] += T(float64(dh[i]) * float64(u[i]) * s * (1 + x*(1-s)))
			du[i] += dh[i] * T(x*s)
		}
	})
}
