package cpu

import "math"

// Rotary position embedding as transformers' Qwen3RotaryEmbedding + apply_rotary_pos_emb:
// rotate-half pairs (i, i+d/2), not interleaved pairs. For i < d/2 with angle a = pos·inv_freq[i]:
//   y[i]     = x[i]·cos a − x[i+d/2]·sin a
//   y[i+d/2] = x[i+d/2]·cos a + x[i]·sin a
// The backward pass is the transposed (inverse) rotation.
//
// The angle is computed the way transformers does in fp32 — inv_freq = 1/θ^(2i/d) rounded to
// fp32, angle = fp32(pos · inv_freq) — because at positions in the tens of thousands the fp32
// rounding of the angle (≈ 1e-3 rad) is larger than any tolerance we test with; cos/sin of that
// fp32 angle are then evaluated in float64 and rounded to T.

// ropeInvFreq returns inv_freq[i] = 1/θ^(2i/d), i < d/2, as transformers computes it in fp32.
func ropeInvFreq(theta float64, d int) []float32 {
	inv := make([]float32, d/2)
	for i := range inv {
		exp := float32(float32(2*i) / float32(d))
		inv[i] = float32(1 / float32(math.Pow(float64(float32(theta)), float64(exp))))
	}
	return inv
}

// ropeTables returns cos and sin, [N, d/2], for the given positions.
func ropeTables[T float](positions []int32, invFreq []float32) (cos, sin []T) {
	h := len(invFreq)
	cos = make([]T, len(positions)*h)
	sin = make([]T, len(positions)*h)
	for n, p := range positions {
		for i, f := range invFreq {
			a := float64(float32(p) * f)
			cos[n*h+i] = T(math.Cos(a))
			sin[n*h+i] = T(math.Sin(a))
		}
	}
	return cos, sin
}

// ropeForward rotates x [N, heads, d] into out using the tables of each row's position.
func ropeForward[T float](out, x, cos, sin []T, N, heads, d int) {
	h := d / 2
	parallelFor(N, grainFor(heads*d), func(lo, hi int) {
		for n := lo; n < hi; n++ {
			c, s := cos[n*h:(n+1)*h], sin[n*h:(n+1)*h]
			for hd := range heads {
				o := (n*heads + hd) * d
				xr, or := x[o:o+d], out[o:o+d]
				for i := range h {
					a, b := xr[i], xr[i+h]
					or[i] = a*c[i] - b*s[i]
					or[i+h] = b*c[i] + a*s[i]
				}
			}
		}
	})
}

// ropeBackward accumulates dx += Rᵀ·dout.
func ropeBackward[T float](dx, dout, cos, sin []T, N, heads, d int) {
	h := d / 2
	parallelFor(N, grainFor(heads*d), func(lo, hi int) {
		for n := lo; n < hi; n++ {
			c, s := cos[n*h:(n+1)*h], sin[n*h:(n+1)*h]
			for hd := range heads {
				o := (n*heads + hd) * d
				dr, gr := dout[o:o+d], dx[o:o+d]
				for i := range h {
					a, b := dr[i], dr[i+h]
					gr[i] += a*c[i] + b*s[i]
					gr[i+h] += b*c[i] - a*s[i]
				}
			}
		}
	})
}
