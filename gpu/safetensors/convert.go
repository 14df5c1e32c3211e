package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"tau2rl/gpu/internal/par"
)

// This file converts between float32 and the on-disk float encodings. Rounding is
// round-to-nearest-even, as torch's Tensor.to(dtype) does, so a checkpoint saved here has the
// same bits as one saved by PyTorch from the same fp32 master weights.
//
// The bulk converters (Encode, Decode, Writer.WriteFloat32, File.Float32, BF16FromFloat32s,
// Float32sFromBF16) apply the scalar functions below to every element, split over the cores
// (gpu/internal/par), on typed views of the byte buffers when the host is little-endian like the
// format (every platform the project ships for), with no per-element byte shuffling: at
// Qwen3-1.7B a checkpoint is 1.7 G values, and the per-element encoding/binary loops they replace
// took seconds per pass (docs/PERFORMANCE.md, "Checkpoint I/O"). A big-endian host, or a buffer
// not aligned to its element size, takes the byte-at-a-time loops, with the same results.

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

// hostLittleEndian is true when the host stores numbers as safetensors does, so a tensor's bytes
// are its values' memory image.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// uint16s views b as little-endian uint16s, when the host allows it (see hostLittleEndian; b's
// start must be 2-byte aligned). len(b) must be even.
func uint16s(b []byte) ([]uint16, bool) {
	if len(b) == 0 {
		return nil, true
	}
	if !hostLittleEndian || uintptr(unsafe.Pointer(&b[0]))%2 != 0 {
		return nil, false
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2), true
}

// float32Bytes views f as its little-endian bytes, when the host is little-endian.
func float32Bytes(f []float32) ([]byte, bool) {
	if len(f) == 0 {
		return nil, true
	}
	if !hostLittleEndian {
		return nil, false
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f)), true
}

// BF16FromFloat32s sets dst[i] = BF16FromFloat32(src[i]) for every i, over all cores. The slices
// must have the same length.
func BF16FromFloat32s(dst []uint16, src []float32) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("safetensors: BF16FromFloat32s of %d values into %d", len(src), len(dst)))
	}
	par.For(len(src), func(lo, hi int) {
		d, s := dst[lo:hi], src[lo:hi]
		d = d[:len(s)]
		for i, f := range s {
			d[i] = BF16FromFloat32(f)
		}
	})
}

// Float32sFromBF16 sets dst[i] = Float32FromBF16(src[i]) for every i, over all cores. The slices
// must have the same length.
func Float32sFromBF16(dst []float32, src []uint16) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("safetensors: Float32sFromBF16 of %d values into %d", len(src), len(dst)))
	}
	par.For(len(src), func(lo, hi int) {
		d, s := dst[lo:hi], src[lo:hi]
		d = d[:len(s)]
		for i, h := range s {
			d[i] = Float32FromBF16(h)
		}
	})
}

func f16FromFloat32s(dst []uint16, src []float32) {
	par.For(len(src), func(lo, hi int) {
		d, s := dst[lo:hi], src[lo:hi]
		d = d[:len(s)]
		for i, f := range s {
			d[i] = F16FromFloat32(f)
		}
	})
}

func float32sFromF16(dst []float32, src []uint16) {
	par.For(len(src), func(lo, hi int) {
		d, s := dst[lo:hi], src[lo:hi]
		d = d[:len(s)]
		for i, h := range s {
			d[i] = Float32FromF16(h)
		}
	})
}

// canEncode reports whether Encode handles dt.
func canEncode(dt DType) bool { return dt == F32 || dt == BF16 || dt == F16 }

// Encode converts src to little-endian bytes of dtype dt (F32, F16 or BF16).
func Encode(dt DType, src []float32) ([]byte, error) {
	if !canEncode(dt) {
		return nil, fmt.Errorf("safetensors: cannot encode float32 as %s", dt)
	}
	b := make([]byte, len(src)*dt.Size())
	encodeInto(dt, b, src)
	return b, nil
}

// encodeInto is Encode into b, which holds exactly len(src) values of dt (canEncode(dt)).
func encodeInto(dt DType, b []byte, src []float32) {
	switch dt {
	case F32:
		if fb, ok := float32Bytes(src); ok {
			copy(b, fb)
			return
		}
		for i, f := range src {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
	case BF16:
		if d, ok := uint16s(b); ok {
			BF16FromFloat32s(d, src)
			return
		}
		for i, f := range src {
			binary.LittleEndian.PutUint16(b[2*i:], BF16FromFloat32(f))
		}
	case F16:
		if d, ok := uint16s(b); ok {
			f16FromFloat32s(d, src)
			return
		}
		for i, f := range src {
			binary.LittleEndian.PutUint16(b[2*i:], F16FromFloat32(f))
		}
	}
}

// Decode converts little-endian bytes of dtype dt (F64, F32, F16 or BF16) into dst, which must
// have one element per encoded value.
func Decode(dt DType, b []byte, dst []float32) error {
	if dt.Size() == 0 || len(b) != len(dst)*dt.Size() {
		return fmt.Errorf("safetensors: decode %s: %d bytes for %d values", dt, len(b), len(dst))
	}
	switch dt {
	case F32:
		if db, ok := float32Bytes(dst); ok {
			copy(db, b)
			return nil
		}
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case BF16:
		if s, ok := uint16s(b); ok {
			Float32sFromBF16(dst, s)
			return nil
		}
		for i := range dst {
			dst[i] = Float32FromBF16(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case F16:
		if s, ok := uint16s(b); ok {
			float32sFromF16(dst, s)
			return nil
		}
		for i := range dst {
			dst[i] = Float32FromF16(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case F64:
		par.For(len(dst), func(lo, hi int) {
			for i := lo; i < hi; i++ {
				dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
			}
		})
	default:
		return fmt.Errorf("safetensors: cannot decode %s as float32", dt)
	}
	return nil
}
