package cpu

import "math"

// Grouped-query attention under the prefix-tree mask. q is [N, nh, d] (after q_norm and RoPE),
// k and v are [N, nkv, d]; query head h reads key/value head h / (nh/nkv) (transformers'
// repeat_kv). Scores are scaled by 1/sqrt(d) (Qwen3Attention.scaling = head_dim**-0.5).
//
// The mask is the contract's: key j is visible to query i ⇔ j ≤ i ≤ subtreeEnd[j], i.e. j is i
// or one of its ancestors. No N×N matrix is built: each query scans the keys before it and keeps
// those whose subtree contains it. Like flash attention, the forward pass saves only the
// log-sum-exp of each (query, head) row, and the backward pass recomputes the probabilities:
//   p_j = exp(s_j − lse),  D = Σ_d dout·out,  ds_j = p_j·(dout·v_j − D),
//   dq += scale·Σ_j ds_j·k_j,  dk_j += scale·ds_j·q,  dv_j += p_j·dout.

// visibleKeys appends to buf the keys visible to query i, in increasing order.
func visibleKeys(buf []int32, i int, subtreeEnd []int32) []int32 {
	buf = buf[:0]
	for j := 0; j <= i; j++ {
		if int(subtreeEnd[j]) >= i {
			buf = append(buf, int32(j))
		}
	}
	return buf
}

// attentionForward writes out [N, nh, d] and lse [N, nh].
func attentionForward[T float](out, lse, q, k, v []T, subtreeEnd []int32, N, nh, nkv, d int) {
	group := nh / nkv
	scale := 1 / math.Sqrt(float64(d))
	parallelFor(N, grainFor(N*nh*d), func(lo, hi int) {
		vis := make([]int32, 0, N)
		sc := make([]float64, N)
		acc := make([]float64, d)
		for i := lo; i < hi; i++ {
			vis = visibleKeys(vis, i, subtreeEnd)
			for h := range nh {
				kh := h / group
				qr := q[(i*nh+h)*d : (i*nh+h+1)*d]
				m := math.Inf(-1)
				for t, j := range vis {
					s := float64(T(dot(qr, k[(int(j)*nkv+kh)*d:(int(j)*nkv+kh+1)*d])) * T(scale))
					sc[t] = s
					m = max(m, s)
				}
				var sum float64
				clear(acc)
				for t, j := range vis {
					p := math.Exp(sc[t] - m)
					sum += p
					vr := v[(int(j)*nkv+kh)*d : (int(j)*nkv+kh+1)*d]
					for x := range d {
						acc[x] += p * float64(vr[x])
					}
				}
				or := out[(i*nh+h)*d : (i*nh+h+1)*d]
				for x := range d {
					or[x] = T(acc[x] / sum)
				}
				lse[i*nh+h] = T(m + math.Log(sum))
			}
		}
	})
}

// attentionBackward accumulates dq, dk, dv. It parallelizes over key/value heads: all writes to
// dk and dv of one kv head come from the query heads of its group, so parts never share memory.
func attentionBackward[T float](dq, dk, dv, dout, q, k, v, out, lse []T, subtreeEnd []int32, N, nh, nkv, d int) {
	group := nh / nkv
	scale := 1 / math.Sqrt(float64(d))
	parallelFor(nkv, 1, func(lo, hi int) {
		vis := make([]int32, 0, N)
		for kh := lo; kh < hi; kh++ {
			for i := range N {
				vis = visibleKeys(vis, i, subtreeEnd)
				for h := kh * group; h < (kh+1)*group; h++ {
					row := (i*nh + h) * d
					qr, dor := q[row:row+d], dout[row:row+d]
					dqr := dq[row : row+d]
					D := float64(dot(dor, out[row:row+d]))
					l := float64(lse[i*nh+h])
					for _, j := range vis {
						kv := (int(j)*nkv + kh) * d
						kr, vr := k[kv:kv+d], v[kv:kv+d]
						s := float64(T(dot(qr, kr)) * T(scale))
						p := math.Exp(s - l)
						ds := p * (float64(dot(dor, vr)) - D)
						axpy(T(ds*scale), kr, dqr)
						axpy(T(ds*scale), qr, dk[kv:kv+d])
						axpy(T(p), dor, dv[kv:kv+d])
					}
				}
			}
		}
	})
}
