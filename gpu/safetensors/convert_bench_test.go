//go:build unix

package safetensors

import (
	"math/rand/v2"
	"testing"

	"tau2rl/lib/cputime"
)

// Conversion throughput of the bulk converters (docs/PERFORMANCE.md, "Checkpoint I/O"), on 16 M
// values (a Qwen3-1.7B MLP matrix is 12.6 M). Bytes are the fp32 bytes converted.

const benchValues = 1 << 24

func benchFloats() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	f := make([]float32, benchValues)
	for i := range f {
		f[i] = float32(r.NormFloat64() * 0.02)
	}
	return f
}

func BenchmarkEncodeBF16(b *testing.B) {
	src := benchFloats()
	dst := make([]byte, 2*len(src))
	b.SetBytes(4 * int64(len(src)))
	b.ResetTimer()
	c0 := cputime.Now()
	for range b.N {
		encodeInto(BF16, dst, src)
	}
	cputime.Report(b, c0, cputime.Milliseconds)
}

func BenchmarkDecodeBF16(b *testing.B) {
	src := benchFloats()
	enc, _ := Encode(BF16, src)
	b.SetBytes(4 * int64(len(src)))
	b.ResetTimer()
	c0 := cputime.Now()
	for range b.N {
		if err := Decode(BF16, enc, src); err != nil {
			b.Fatal(err)
		}
	}
	cputime.Report(b, c0, cputime.Milliseconds)
}

// BenchmarkEncodeBF16Scalar is the per-element encoding/binary loop the bulk converters replaced,
// for comparison.
func BenchmarkEncodeBF16Scalar(b *testing.B) {
	src := benchFloats()
	dst := make([]byte, 2*len(src))
	b.SetBytes(4 * int64(len(src)))
	b.ResetTimer()
	c0 := cputime.Now()
	for range b.N {
		for i, f := range src {
			dst[2*i] = byte(BF16FromFloat32(f))
			dst[2*i+1] = byte(BF16FromFloat32(f) >> 8)
		}
	}
	cputime.Report(b, c0, cputime.Milliseconds)
}
