package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// This file converts between float32 and the on-disk float encodings. Rounding is
// round-to-nearest-even, as torch's Tensor.to(dtype) does, so a checkpoint saved here has the
// same bits as one saved by PyTorch from the same fp32 master weights.

// BF16FromFloat32 rounds f to bfloat16 (round to nearest, ties to even; NaN stays a quiet NaN).
func BF16FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep sign, force a quiet NaN payload
		return uint16(u>>16) | 0x40
	}
	rounding := uint32(0x7fff) + (u>>16)&1
	return uint16((u + rounding) >> 16)
}

// Float32FromBF16 widens a bfloat16 exactly.
func Float32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16FromFloat32 rounds f to IEEE half precision (round to nearest, ties to even), with
// subnormals, overflow to ±Inf and quiet NaNs.
func F16FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23) & 0xff
	man := u & 0x7fffff
	switch {
	case exp == 0xff:
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal half (or zero): shift the full significand (with its implicit 1) right.
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint32(14 - e) // 13 for the normal mantissa cut, plus 1-e
		half := uint32(1) << (shift - 1)
		rem := m & ((uint32(1) << shift) - 1)
		r := m >> shift
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, up to Inf: still correct
	}
	return sign | uint16(r)
}

// Float32FromF16 widens an IEEE half exactly.
func Float32FromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		// subnormal: value = man · 2^-24
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// Encode converts src to little-endian bytes of dtype dt (F32, F16 or BF16).
func Encode(dt DType, src []float32) ([]byte, error) {
	switch dt {
	case F32:
		b := make([]byte, 4*len(src))
		for i, f := range src {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
		return b, nil
	case BF16:
		b := make([]byte, 2*len(src))
		for i, f := range src {
			binary.LittleEndian.PutUint16(b[2*i:], BF16FromFloat32(f))
		}
		return b, nil
	case F16:
		b := make([]byte, 2*len(src))
		for i, f := range src {
			binary.LittleEndian.PutUint16(b[2*i:], F16FromFloat32(f))
		}
		return b, nil
	}
	return nil, fmt.Errorf("safetensors: cannot encode float32 as %s", dt)
}

// Decode converts little-endian bytes of dtype dt (F64, F32, F16 or BF16) into dst, which must
// have one element per encoded value.
func Decode(dt DType, b []byte, dst []float32) error {
	if dt.Size() == 0 || len(b) != len(dst)*dt.Size() {
		return fmt.Errorf("safetensors: decode %s: %d bytes for %d values", dt, len(b), len(dst))
	}
	switch dt {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = Float32FromBF16(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = Float32FromF16(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	default:
		return fmt.Errorf("safetensors: cannot decode %s as float32", dt)
	}
	return nil
}
