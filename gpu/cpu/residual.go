package cpu

// The residual stream of the pre-norm block: x_mid = x + attn(...), x_next = x_mid + mlp(...).
// Each stream value is its own buffer (rather than updated in place) so the backward pass has
// every layer's input for the RMSNorm backward without recomputation.

// residualForward sets out = x + delta over n values.
func residualForward[T float](out, x, delta []T, n int) {
	for i := range n {
		out[i] = x[i] + delta[i]
	}
}

// residualBackward passes the gradient of the sum to both summands: dx += dout, ddelta += dout.
func residualBackward[T float](dx, ddelta, dout []T, n int) {
	for i := range n {
		dx[i] += dout[i]
		ddelta[i] += dout[i]
	}
}
