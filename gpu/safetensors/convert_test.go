package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"tau2rl/gpu/internal/par"
)

// The bulk converters must give exactly the bits of the scalar rules (round to nearest even,
// NaN kept quiet with its sign, subnormals and infinities as they are), on the parallel path
// (more than 2·par.Grain values), the single-goroutine path and the byte-at-a-time fallback
// (a misaligned buffer), for every bf16/f16 bit pattern and for float32 inputs that exercise
// each rounding case.

// specialF32 are float32 bit patterns at the edges of the bf16 and f16 rules.
var specialF32 = []uint32{
	0x00000000, 0x80000000, // ±0
	0x00000001, 0x80000001, 0x00007fff, 0x00008000, 0x00008001, 0x00018000, 0x007fffff, // subnormals, ties among them
	0x00800000, 0x3f800000, 0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0xbf818000, // ties to even, above, below
	0x7f7f7fff, 0x7f7f8000, 0x7f7fffff, 0xff7fffff, // max finite: rounds to ±Inf
	0x7f800000, 0xff800000, // ±Inf
	0x7f800001, 0xff800001, 0x7fc00000, 0xffc00000, 0x7fbfffff, 0x7fffffff, 0x7f810000, // NaNs, signalling and quiet
	0x33800000, 0x33000000, 0x33c00000, 0x387fe000, 0x477ff000, 0x477fefff, // f16 subnormal/overflow edges
}

// convertInputs is every special value, every float32 whose top half is any bf16 pattern (low
// half 0x8000: a tie), and random bit patterns, more than 2·par.Grain in all.
func convertInputs() []float32 {
	var in []float32
	for _, u := range specialF32 {
		in = append(in, math.Float32frombits(u))
	}
	for h := range uint32(1 << 16) {
		in = append(in, math.Float32frombits(h<<16), math.Float32frombits(h<<16|0x8000), math.Float32frombits(h<<16|0x7fff))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for len(in) < 2*par.Grain+12345 {
		in = append(in, math.Float32frombits(r.Uint32()))
	}
	return in
}

// misaligned returns an n-byte slice whose start is odd, forcing the byte-at-a-time path.
func misaligned(n int) []byte { return make([]byte, n+1)[1:] }

func TestBulkEncodeMatchesScalar(t *testing.T) {
	in := convertInputs()
	for _, tc := range []struct {
		dt     DType
		scalar func(float32) uint16
	}{{BF16, BF16FromFloat32}, {F16, F16FromFloat32}} {
		want := make([]byte, 2*len(in))
		for i, f := range in {
			binary.LittleEndian.PutUint16(want[2*i:], tc.scalar(f))
		}
		got, err := Encode(tc.dt, in)
		if err != nil {
			t.Fatal(err)
		}
		mis := misaligned(2 * len(in))
		encodeInto(tc.dt, mis, in)
		small, _ := Encode(tc.dt, in[:1000]) // one goroutine
		for name, b := range map[string][]byte{"parallel": got, "misaligned": mis, "small": small} {
			if !bytes.Equal(b, want[:len(b)]) {
				i := firstDiff(b, want)
				t.Errorf("%s %s: value %d (%#08x) encodes to %#04x, the scalar rule gives %#04x", tc.dt, name, i/2,
					math.Float32bits(in[i/2]), binary.LittleEndian.Uint16(b[i&^1:]), binary.LittleEndian.Uint16(want[i&^1:]))
			}
		}
	}
	// F32 is the memory image, NaN payloads included.
	b, _ := Encode(F32, in)
	for i, f := range in {
		if got := binary.LittleEndian.Uint32(b[4*i:]); got != math.Float32bits(f) {
			t.Fatalf("F32 value %d: %#08x, want %#08x", i, got, math.Float32bits(f))
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// The rounding rule itself, through the bulk path: round to nearest, ties to even; NaN → quiet
// NaN with its sign and top payload bits; the largest finite values round to infinity.
func TestBulkBF16Golden(t *testing.T) {
	cases := []struct{ in, want uint32 }{
		{0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81}, {0x3f807fff, 0x3f80},
		{0x00000001, 0x0000}, {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x00008001, 0x0001}, {0x807fffff, 0x8080},
		{0x7f7fffff, 0x7f80}, {0xff7fffff, 0xff80}, {0x7f800000, 0x7f80}, {0xff800000, 0xff80},
		{0x7f800001, 0x7fc0}, {0xff800001, 0xffc0}, {0x7fbfffff, 0x7fff}, {0x7f810000, 0x7fc1}, {0x80000000, 0x8000},
	}
	in := make([]float32, 2*par.Grain+len(cases)) // the cases at the end of a parallel conversion
	off := len(in) - len(cases)
	for i, c := range cases {
		in[off+i] = math.Float32frombits(c.in)
	}
	dst := make([]uint16, len(in))
	BF16FromFloat32s(dst, in)
	for i, c := range cases {
		if got := dst[off+i]; uint32(got) != c.want {
			t.Errorf("bf16(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestBulkDecodeMatchesScalar(t *testing.T) {
	// Every 16-bit pattern, repeated past the parallel threshold.
	n := 2*par.Grain + 777
	enc := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(enc[2*i:], uint16(i*40503)) // odd multiplier: every pattern
	}
	mis := misaligned(len(enc))
	copy(mis, enc)
	for _, tc := range []struct {
		dt     DType
		scalar func(uint16) float32
	}{{BF16, Float32FromBF16}, {F16, Float32FromF16}} {
		for name, b := range map[string][]byte{"parallel": enc, "misaligned": mis, "small": enc[:2000]} {
			got := make([]float32, len(b)/2)
			if err := Decode(tc.dt, b, got); err != nil {
				t.Fatal(err)
			}
			for i, f := range got {
				h := binary.LittleEndian.Uint16(b[2*i:])
				if math.Float32bits(f) != math.Float32bits(tc.scalar(h)) {
					t.Fatalf("%s %s: %#04x decodes to %#08x, the scalar rule gives %#08x", tc.dt, name, h,
						math.Float32bits(f), math.Float32bits(tc.scalar(h)))
				}
			}
		}
	}
	// F32 and F64 through their own paths, bit for bit (F64 narrows as float32(x) does).
	in := convertInputs()
	b, _ := Encode(F32, in)
	got := make([]float32, len(in))
	for name, src := range map[string][]byte{"aligned": b, "misaligned": append(misaligned(0), b...)} {
		if err := Decode(F32, src, got); err != nil {
			t.Fatal(err)
		}
		for i := range in {
			if math.Float32bits(got[i]) != math.Float32bits(in[i]) {
				t.Fatalf("F32 %s value %d: %#08x, want %#08x", name, i, math.Float32bits(got[i]), math.Float32bits(in[i]))
			}
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	f64 := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(f64[8*i:], r.Uint64())
	}
	got = make([]float32, n)
	if err := Decode(F64, f64, got); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want := float32(math.Float64frombits(binary.LittleEndian.Uint64(f64[8*i:])))
		if math.Float32bits(got[i]) != math.Float32bits(want) && !(want != want && got[i] != got[i]) {
			t.Fatalf("F64 value %d: %v, want %v", i, got[i], want)
		}
	}
}

// A tensor larger than one write chunk and one read chunk, in each float dtype, comes back from a
// file as the scalar rules say, and the file bytes are those of Encode.
func TestChunkedWriteReadRoundTrip(t *testing.T) {
	in := convertInputs()
	n := writeChunk + 1001
	for len(in) < n {
		in = append(in, in[:min(len(in), n-len(in))]...)
	}
	in = in[:n]
	for _, dt := range []DType{BF16, F16, F32} {
		dir := t.TempDir()
		specs := []TensorSpec{{Name: "a", DType: dt, Shape: []int{3}}, {Name: "big", DType: dt, Shape: []int{n}}}
		src := map[string][]float32{"a": {1, 2, 3}, "big": in}
		if _, err := WriteDir(dir, specs, nil, 0, func(name string) ([]float32, error) { return src[name], nil }); err != nil {
			t.Fatal(err)
		}
		f, err := Open(filepath.Join(dir, SingleFile))
		if err != nil {
			t.Fatal(err)
		}
		_, raw, err := f.Raw("big")
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := Encode(dt, in); !bytes.Equal(raw, want) {
			t.Fatalf("%s: file bytes differ from Encode at byte %d", dt, firstDiff(raw, want))
		}
		got, shape, err := f.Float32("big")
		f.Close()
		if err != nil || len(shape) != 1 || shape[0] != n {
			t.Fatalf("%s: read big: shape %v, %v", dt, shape, err)
		}
		want := make([]float32, n)
		if err := Decode(dt, raw, want); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s value %d: read %#08x, want %#08x", dt, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
			// Round trip: a widened value narrows back to the same bits unless it is a NaN.
			if dt == BF16 && want[i] == want[i] && BF16FromFloat32(got[i]) != binary.LittleEndian.Uint16(raw[2*i:]) {
				t.Fatalf("bf16 value %d does not survive the round trip", i)
			}
		}
	}
}

// File.Float32 refuses a dtype it cannot convert even for an empty tensor, as it always has.
func TestFloat32RefusesIntegerDType(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, []TensorSpec{{Name: "i", DType: I32, Shape: []int{0}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor("i", nil); err != nil {
		t.Fatal(err)
	}
	f, err := NewFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Float32("i"); err == nil {
		t.Fatal("Float32 of an I32 tensor succeeded")
	}
}
