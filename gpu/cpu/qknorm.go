package cpu

// Qwen3's q_norm and k_norm: an RMSNorm with a weight of width head_dim shared by all heads,
// applied to each head's slice of the q (or k) projection BEFORE RoPE ("unlike olmo, only on the
// head dim"). With the [N, heads, head_dim] layout that is exactly rmsnorm over N·heads rows of
// width head_dim, which is how it is computed here.

// qkNormForward normalizes x [N, heads, hd] per head into out, saving rstd [N, heads].
func qkNormForward[T float](out, rstd, x, w []T, N, heads, hd int, eps float64) {
	rmsnormForward(out, rstd, x, w, N*heads, hd, eps)
}

// qkNormBackward accumulates dx and the shared weight's gradient dw.
func qkNormBackward[T float](dx, dw, dout, x, w, rstd []T, N, heads, hd int) {
	rmsnormBackward(dx, dw, dout, x, w, rstd, N*heads, hd)
}
