package knowledge

import (
	"math"
	"math/big"
)

// crLog is the correctly rounded natural logarithm. rank_bm25 uses
// Python's math.log, which is the C library's log; glibc's log is
// correctly rounded on these inputs, while Go's math.Log may be one unit in
// the last place off (e.g. ln(519.5)), which shifts BM25 scores by an ulp
// and can reorder near-ties. One Newton step in 256-bit arithmetic from
// math.Log's estimate gives the exact rounding.
func crLog(x float64) float64 {
	y0 := math.Log(x)
	if math.IsInf(y0, 0) || math.IsNaN(y0) || x <= 0 {
		return y0
	}
	const prec = 256
	e := bigExp(new(big.Float).SetPrec(prec).SetFloat64(y0), prec)
	// y1 = y0 + (x - e^y0) / e^y0
	d := new(big.Float).SetPrec(prec).SetFloat64(x)
	d.Sub(d, e)
	d.Quo(d, e)
	d.Add(d, new(big.Float).SetPrec(prec).SetFloat64(y0))
	f, _ := d.Float64()
	return f
}

// bigExp computes e^y to about prec bits: y is scaled down by 2^32, the
// Taylor series is summed, and the result squared back 32 times.
func bigExp(y *big.Float, prec uint) *big.Float {
	const k = 32
	r := new(big.Float).SetPrec(prec).SetMantExp(y, -k)
	sum := new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	for n := int64(1); n < 40; n++ {
		term.Mul(term, r)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(n))
		sum.Add(sum, term)
	}
	for i := 0; i < k; i++ {
		sum.Mul(sum, sum)
	}
	return sum
}
