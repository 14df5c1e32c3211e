package gpu

import (
	"math"
	"slices"
)

// SampleLogits is the reference sampler: every Decoder draws tokens by this rule, so the pure-Go
// and CUDA backends agree on which token a given uniform draw selects (up to fp32 summation order
// near a boundary), and tests compare a backend's draws against it.
//
// The rule, for logits ℓ over the vocabulary and a uniform draw u ∈ [0,1):
//
//  1. Greedy (Temperature 0): the token of the largest logit, ties to the lowest id; its log-prob
//     is log softmax(ℓ) at that token.
//  2. Otherwise z = ℓ / T and p = softmax(z) in fp32 arithmetic with a float64 normaliser; the
//     returned log-prob is log p at the drawn token (unfiltered, see Sampled.LogProb).
//  3. Filters keep every token whose z is at least a threshold, so tied tokens are kept or dropped
//     together (a device can find the threshold by selection, without sorting the vocabulary):
//     top-k keeps z ≥ the k-th largest z; top-p keeps z ≥ the z of the token at which the mass of
//     the tokens taken in decreasing order first reaches TopP; min-p keeps p ≥ MinP·max p. The
//     kept set is the intersection, never empty (the argmax always passes).
//  4. The draw walks the kept tokens in increasing id order, accumulating p, and takes the first
//     whose running sum exceeds u times the kept mass (the last kept token if rounding leaves none).
func SampleLogits(logits []float32, p SampleParams, u float64) Sampled {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	t := p.Temperature
	if p.Greedy() {
		t = 1
	}
	inv := 1 / t
	zmax := logits[best] * inv
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v*inv - zmax))
	}
	logZ := float32(math.Log(sum))
	logProb := func(i int) float32 { return logits[i]*inv - zmax - logZ }
	if p.Greedy() {
		return Sampled{Token: int32(best), LogProb: logProb(best)}
	}

	// Threshold on z below which tokens are dropped (−Inf keeps everything).
	thr := float32(math.Inf(-1))
	if p.MinP > 0 {
		// p_i ≥ MinP·p_max  ⇔  z_i − zmax ≥ log MinP.
		thr = max(thr, zmax+float32(math.Log(float64(p.MinP))))
	}
	if p.TopK > 0 && int(p.TopK) < len(logits) || p.TopP < 1 {
		sorted := make([]float32, len(logits))
		for i, v := range logits {
			sorted[i] = v * inv
		}
		slices.SortFunc(sorted, func(a, b float32) int {
			switch {
			case a > b:
				return -1
			case a < b:
				return 1
			}
			return 0
		})
		if p.TopK > 0 && int(p.TopK) < len(sorted) {
			thr = max(thr, sorted[p.TopK-1])
		}
		if p.TopP < 1 {
			var cum float64
			for _, z := range sorted {
				cum += math.Exp(float64(z-zmax)) / sum
				if cum >= float64(p.TopP) {
					thr = max(thr, z)
					break
				}
			}
		}
	}

	var mass float64
	for _, v := range logits {
		if z := v * inv; z >= thr {
			mass += math.Exp(float64(z - zmax))
		}
	}
	target := u * mass
	var acc float64
	last := best
	for i, v := range logits {
		z := v * inv
		if z < thr {
			continue
		}
		acc += math.Exp(float64(z - zmax))
		last = i
		if acc > target {
			return Sampled{Token: int32(i), LogProb: logProb(i)}
		}
	}
	return Sampled{Token: int32(last), LogProb: logProb(last)}
}
