package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBF16Rounding(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81}, // above half
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // max float rounds to +Inf, as torch does
	} {
		if got := BF16FromFloat32(tc.in); got != tc.want {
			t.Errorf("BF16FromFloat32(%v) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if h := BF16FromFloat32(float32(math.NaN())); !math.IsNaN(float64(Float32FromBF16(h))) {
		t.Errorf("NaN became %#04x", h)
	}
}

func TestF16Rounding(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},
		{65520, 0x7c00},                       // rounds to +Inf
		{float32(math.Ldexp(1, -14)), 0x0400}, // smallest normal
		{float32(math.Ldexp(1, -24)), 0x0001}, // smallest subnormal
		{float32(math.Ldexp(1, -25)), 0x0000}, // half of it: tie to even → 0
		{float32(math.Ldexp(1.5, -25)), 0x0001},
		{float32(math.Ldexp(3, -25)), 0x0002},     // 1.5 ulp: tie → even 2
		{1 + float32(math.Ldexp(1, -11)), 0x3c00}, // tie at 1: even
		{1 + float32(math.Ldexp(3, -11)), 0x3c02},
		{float32(math.Inf(-1)), 0xfc00},
	} {
		if got := F16FromFloat32(tc.in); got != tc.want {
			t.Errorf("F16FromFloat32(%v) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	// Every finite half survives half → float32 → half.
	for h := range uint32(1 << 16) {
		f := Float32FromF16(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := F16FromFloat32(f); back != uint16(h) {
			t.Fatalf("half %#04x → %v → %#04x", h, f, back)
		}
	}
	for h := range uint32(1 << 16) {
		f := Float32FromBF16(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := BF16FromFloat32(f); back != uint16(h) {
			t.Fatalf("bf16 %#04x → %v → %#04x", h, f, back)
		}
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	vals := map[string][]float32{
		"a.weight": {1, -2.5, 3.25, 1e-3, 7},
		"b":        {0.1, 0.2},
		"scalar":   {42},
		"empty":    {},
	}
	specs := []TensorSpec{
		{Name: "a.weight", DType: BF16, Shape: []int{5}},
		{Name: "b", DType: F32, Shape: []int{1, 2}},
		{Name: "scalar", DType: F16, Shape: []int{}},
		{Name: "empty", DType: F32, Shape: []int{0, 3}},
	}
	files, err := WriteDir(dir, specs, map[string]string{"format": "pt"}, 0, func(n string) ([]float32, error) { return vals[n], nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0] != SingleFile {
		t.Fatalf("files %v", files)
	}
	raw, err := os.ReadFile(filepath.Join(dir, SingleFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint64(raw); (8+n)%8 != 0 {
		t.Fatalf("header length %d leaves data unaligned", n)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, s := range specs {
		got, shape, err := d.Float32(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(shape) != len(s.Shape) {
			t.Fatalf("%s: shape %v, want %v", s.Name, shape, s.Shape)
		}
		for i, v := range vals[s.Name] {
			want := v
			switch s.DType {
			case BF16:
				want = Float32FromBF16(BF16FromFloat32(v))
			case F16:
				want = Float32FromF16(F16FromFloat32(v))
			}
			if got[i] != want {
				t.Fatalf("%s[%d] = %v, want %v", s.Name, i, got[i], want)
			}
		}
	}
	f, _ := Open(filepath.Join(dir, SingleFile))
	defer f.Close()
	if f.Header.Metadata["format"] != "pt" {
		t.Fatalf("metadata %v", f.Header.Metadata)
	}
}

func TestShardedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	var specs []TensorSpec
	vals := map[string][]float32{}
	for i, n := range []string{"x", "y", "z", "w"} {
		specs = append(specs, TensorSpec{Name: n, DType: F32, Shape: []int{4}})
		vals[n] = []float32{float32(i), 1, 2, 3}
	}
	// A single-file checkpoint first: the sharded save must remove it so it cannot shadow.
	if _, err := WriteDir(dir, specs, nil, 0, func(n string) ([]float32, error) { return vals[n], nil }); err != nil {
		t.Fatal(err)
	}
	files, err := WriteDir(dir, specs, nil, 32, func(n string) ([]float32, error) { return vals[n], nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[2] != IndexFile {
		t.Fatalf("files %v, want 2 shards + index", files)
	}
	if _, err := os.Stat(filepath.Join(dir, SingleFile)); !os.IsNotExist(err) {
		t.Fatalf("stale %s left behind", SingleFile)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := strings.Join(d.Names(), ","); got != "w,x,y,z" {
		t.Fatalf("names %s", got)
	}
	for n, want := range vals {
		got, _, err := d.Float32(n)
		if err != nil || got[0] != want[0] {
			t.Fatalf("%s: %v %v", n, got, err)
		}
	}
}

func header(s string) []byte {
	b := make([]byte, 8, 8+len(s))
	binary.LittleEndian.PutUint64(b, uint64(len(s)))
	return append(b, s...)
}

func TestBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		data       int
		wantErr    string
	}{
		{"not json", "nope", 0, "not a JSON object"},
		{"unknown dtype", `{"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}}`, 1, "unknown dtype"},
		{"size mismatch", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4, "want 8"},
		{"hole", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "contiguous"},
		{"overlap", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 4, "contiguous"},
		{"duplicate", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "duplicate"},
		{"short data", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4, "data buffer"},
		{"missing field", `{"a":{"dtype":"F32","shape":[1]}}`, 4, "lacks"},
		{"negative dim", `{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 0, "bad dimension"},
		{"bad metadata", `{"__metadata__":{"x":1}}`, 0, "__metadata__"},
		{"trailing", `{}  x`, 0, "trailing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append(header(tc.file), make([]byte, tc.data)...)
			_, err := NewFile(bytes.NewReader(b), int64(len(b)))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
	if _, err := NewFile(bytes.NewReader([]byte{1, 2}), 2); err == nil {
		t.Fatal("2-byte file accepted")
	}
	huge := make([]byte, 16)
	binary.LittleEndian.PutUint64(huge, 1<<40)
	if _, err := NewFile(bytes.NewReader(huge), 16); err == nil {
		t.Fatal("huge header length accepted")
	}
}

func TestWriterRejectsMisuse(t *testing.T) {
	var buf bytes.Buffer
	specs := []TensorSpec{{Name: "a", DType: F32, Shape: []int{2}}, {Name: "b", DType: F32, Shape: []int{1}}}
	w, err := NewWriter(&buf, specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFloat32("b", []float32{1}); err == nil {
		t.Error("out-of-order tensor accepted")
	}
	if err := w.WriteFloat32("a", []float32{1}); err == nil {
		t.Error("short tensor accepted")
	}
	if err := w.WriteFloat32("a", []float32{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Error("Close with a tensor missing accepted")
	}
	if _, err := EncodeHeader([]TensorSpec{{Name: "a", DType: F32}, {Name: "a", DType: F32}}, nil); err == nil {
		t.Error("duplicate names accepted")
	}
}

func TestIndexErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map":{"a":"../evil.safetensors"}}`), 0o644)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "bad shard name") {
		t.Fatalf("path escape: %v", err)
	}
	os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map":{"a":"s.safetensors"}}`), 0o644)
	if _, err := WriteDir(filepath.Join(dir, "x"), []TensorSpec{{Name: "b", DType: F32, Shape: []int{1}}}, nil, 0,
		func(string) ([]float32, error) { return []float32{1}, nil }); err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(dir, "x", SingleFile), filepath.Join(dir, "s.safetensors"))
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "but it is not") {
		t.Fatalf("tensor missing from shard: %v", err)
	}
}

// FuzzParseHeader: any header bytes give a header or an error, never a panic, and an accepted
// header re-encodes to one that parses to the same tensors.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"pt"}}`))
	f.Add([]byte(`{"b":{"dtype":"BF16","shape":[],"data_offsets":[0,2]},"a":{"dtype":"F16","shape":[1,1],"data_offsets":[2,4]}}  `))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[99999999999],"data_offsets":[0,8]}}`))
	f.Add([]byte(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"a":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		specs := make([]TensorSpec, len(h.Tensors))
		for i, ti := range h.Tensors {
			specs[i] = TensorSpec{Name: ti.Name, DType: ti.DType, Shape: ti.Shape}
		}
		enc, err := EncodeHeader(specs, h.Metadata)
		if err != nil {
			t.Fatalf("accepted header does not re-encode: %v", err)
		}
		h2, err := ParseHeader(enc[8:])
		if err != nil {
			t.Fatalf("re-encoded header rejected: %v", err)
		}
		if len(h2.Tensors) != len(h.Tensors) || h2.DataSize != h.DataSize {
			t.Fatalf("round trip changed the header: %+v vs %+v", h, h2)
		}
	})
}

// FuzzFile: arbitrary file images never panic the reader, and every tensor of an accepted file
// reads back.
func FuzzFile(f *testing.F) {
	good := append(header(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), 0, 0, 128, 63)
	f.Add(good)
	f.Add([]byte{})
	f.Add(header(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sf, err := NewFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for _, ti := range sf.Header.Tensors {
			if _, _, err := sf.Raw(ti.Name); err != nil {
				t.Fatalf("accepted file cannot read %q: %v", ti.Name, err)
			}
		}
	})
}
