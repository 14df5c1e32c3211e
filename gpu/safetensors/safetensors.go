// Package safetensors reads and writes Hugging Face safetensors files, the checkpoint format that
// transformers, SGLang and vLLM load.
//
// A file is: an 8-byte little-endian header length N, N bytes of JSON header
// ({"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}}),
// then the byte buffer the offsets index. The reader enforces the format's rules (offsets in order,
// contiguous, covering the whole buffer, sizes matching shape×dtype, no duplicate names) because a
// checkpoint comes from outside the process: a malformed one is an error, never a panic or a
// silent misread. Reading is by ReadAt per tensor, so multi-GB files are never loaded at once.
//
// Sharded checkpoints (model.safetensors.index.json + model-0000k-of-0000n.safetensors) are read
// through OpenDir and written through WriteDir.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// DType is a safetensors element type name as it appears in the header.
type DType string

// The element types of the safetensors format. F32, F16 and BF16 convert to and from float32;
// the others can be read raw.
const (
	F64    DType = "F64"
	F32    DType = "F32"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U64    DType = "U64"
	U32    DType = "U32"
	U16    DType = "U16"
	U8     DType = "U8"
	Bool   DType = "BOOL"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
)

// maxHead is the reference implementation's header size limit (100 MB).
const maxHead = 100 << 20

// Size is the number of bytes of one element, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case I8, U8, Bool, F8E4M3, F8E5M2:
		return 1
	}
	return 0
}

// TensorInfo describes one tensor of a file. Offsets are relative to the start of the data buffer.
type TensorInfo struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int64
}

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Header is a parsed safetensors header: the tensors in data-offset order and the free-form
// string metadata (transformers writes {"format": "pt"}).
type Header struct {
	Tensors  []TensorInfo
	Metadata map[string]string
	// DataSize is the length of the data buffer the offsets cover.
	DataSize int64
}

// Lookup returns the tensor with the given name.
func (h *Header) Lookup(name string) (TensorInfo, bool) {
	for _, t := range h.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

type rawInfo struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// ParseHeader parses and validates the JSON header bytes (without the 8-byte length prefix).
func ParseHeader(b []byte) (*Header, error) {
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("safetensors: header is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("safetensors: header is not a JSON object: %v", err)
	}
	h := &Header{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("safetensors: header: %w", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("safetensors: header key %v is not a string", tok)
		}
		if name == "" {
			return nil, fmt.Errorf("safetensors: empty tensor name")
		}
		if seen[name] {
			return nil, fmt.Errorf("safetensors: duplicate header key %q", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			var md map[string]string
			if err := dec.Decode(&md); err != nil {
				return nil, fmt.Errorf("safetensors: __metadata__ must map strings to strings: %w", err)
			}
			h.Metadata = md
			continue
		}
		var ri rawInfo
		if err := dec.Decode(&ri); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		if ri.DType == nil || ri.Shape == nil || ri.DataOffsets == nil {
			return nil, fmt.Errorf("safetensors: tensor %q lacks dtype, shape or data_offsets", name)
		}
		dt := DType(*ri.DType)
		if dt.Size() == 0 {
			return nil, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", name, *ri.DType)
		}
		if len(*ri.DataOffsets) != 2 {
			return nil, fmt.Errorf("safetensors: tensor %q: data_offsets must have 2 entries", name)
		}
		ti := TensorInfo{Name: name, DType: dt, Begin: (*ri.DataOffsets)[0], End: (*ri.DataOffsets)[1]}
		n := int64(1)
		for _, d := range *ri.Shape {
			if d < 0 || d > math.MaxInt32 {
				return nil, fmt.Errorf("safetensors: tensor %q: bad dimension %d", name, d)
			}
			if d != 0 && n > math.MaxInt64/8/d {
				return nil, fmt.Errorf("safetensors: tensor %q: shape %v overflows", name, *ri.Shape)
			}
			n *= d
			ti.Shape = append(ti.Shape, int(d))
		}
		if ti.Shape == nil {
			ti.Shape = []int{}
		}
		if ti.Begin < 0 || ti.End < ti.Begin {
			return nil, fmt.Errorf("safetensors: tensor %q: bad data_offsets [%d,%d]", name, ti.Begin, ti.End)
		}
		if want := n * int64(dt.Size()); ti.End-ti.Begin != want {
			return nil, fmt.Errorf("safetensors: tensor %q: %d bytes for shape %v of %s, want %d",
				name, ti.End-ti.Begin, ti.Shape, dt, want)
		}
		h.Tensors = append(h.Tensors, ti)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	// Trailing bytes may only be the writer's space padding.
	rest, _ := io.ReadAll(dec.Buffered())
	if len(bytes.TrimRight(rest, " \t\r\n\x00")) != 0 {
		return nil, fmt.Errorf("safetensors: trailing bytes after header JSON")
	}
	sort.SliceStable(h.Tensors, func(i, j int) bool { return h.Tensors[i].Begin < h.Tensors[j].Begin })
	var off int64
	for _, t := range h.Tensors {
		if t.Begin != off {
			return nil, fmt.Errorf("safetensors: tensor %q starts at %d, want %d (data must be contiguous)", t.Name, t.Begin, off)
		}
		off = t.End
	}
	h.DataSize = off
	return h, nil
}

// ReadHeader reads the length prefix and header from the start of r and returns the header and
// the absolute offset at which the data buffer begins. size is the file size, used to check that
// the data buffer is complete.
func ReadHeader(r io.ReaderAt, size int64) (*Header, int64, error) {
	var pre [8]byte
	if _, err := r.ReadAt(pre[:], 0); err != nil {
		return nil, 0, fmt.Errorf("safetensors: read header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n == 0 || n > maxHead {
		return nil, 0, fmt.Errorf("safetensors: header length %d outside (0, %d]", n, maxHead)
	}
	if size >= 0 && int64(n) > size-8 {
		return nil, 0, fmt.Errorf("safetensors: header length %d exceeds file size %d", n, size)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, 8); err != nil {
		return nil, 0, fmt.Errorf("safetensors: read header: %w", err)
	}
	h, err := ParseHeader(b)
	if err != nil {
		return nil, 0, err
	}
	start := 8 + int64(n)
	if size >= 0 && start+h.DataSize != size {
		return nil, 0, fmt.Errorf("safetensors: data buffer is %d bytes, header describes %d", size-start, h.DataSize)
	}
	return h, start, nil
}

// TensorSpec describes a tensor to write.
type TensorSpec struct {
	Name  string
	DType DType
	Shape []int
}

// Bytes is the encoded size of the tensor.
func (s TensorSpec) Bytes() int64 {
	n := int64(s.DType.Size())
	for _, d := range s.Shape {
		n *= int64(d)
	}
	return n
}

// EncodeHeader builds the length-prefixed header for tensors laid out in the given order, padded
// with spaces to an 8-byte boundary as the reference writer does (so the data buffer is aligned).
func EncodeHeader(specs []TensorSpec, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	sep := func() {
		if !first {
			b.WriteByte(',')
		}
		first = false
	}
	if len(metadata) > 0 {
		mb, err := json.Marshal(metadata)
		if err != nil {
			return nil, fmt.Errorf("safetensors: metadata: %w", err)
		}
		sep()
		b.WriteString(`"__metadata__":`)
		b.Write(mb)
	}
	seen := map[string]bool{}
	var off int64
	for _, s := range specs {
		if s.Name == "" || s.Name == "__metadata__" || seen[s.Name] {
			return nil, fmt.Errorf("safetensors: bad or duplicate tensor name %q", s.Name)
		}
		seen[s.Name] = true
		if s.DType.Size() == 0 {
			return nil, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", s.Name, s.DType)
		}
		for _, d := range s.Shape {
			if d < 0 {
				return nil, fmt.Errorf("safetensors: tensor %q: negative dimension in %v", s.Name, s.Shape)
			}
		}
		nb, _ := json.Marshal(s.Name)
		sep()
		b.Write(nb)
		b.WriteString(`:{"dtype":"`)
		b.WriteString(string(s.DType))
		b.WriteString(`","shape":[`)
		for i, d := range s.Shape {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		end := off + s.Bytes()
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	out := make([]byte, 8, 8+b.Len())
	binary.LittleEndian.PutUint64(out, uint64(b.Len()))
	return append(out, b.Bytes()...), nil
}

// Writer streams one safetensors file: the header first, then each tensor's bytes in spec order,
// so a backend can convert and write one tensor at a time without holding a second copy of the
// model in memory.
type Writer struct {
	w     io.Writer
	specs []TensorSpec
	next  int
	// scratch holds one chunk of converted values (WriteFloat32), reused across tensors.
	scratch []byte
}

// writeChunk is how many values WriteFloat32 converts before writing them: 8 MiB of bf16, so a
// 600 MB embedding is never encoded into a second full-size buffer, yet each write is large.
const writeChunk = 1 << 22

// NewWriter writes the header for specs to w and returns a Writer expecting their data in order.
func NewWriter(w io.Writer, specs []TensorSpec, metadata map[string]string) (*Writer, error) {
	hb, err := EncodeHeader(specs, metadata)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(hb); err != nil {
		return nil, fmt.Errorf("safetensors: write header: %w", err)
	}
	return &Writer{w: w, specs: specs}, nil
}

// expect checks that the next tensor is name and holds n bytes.
func (w *Writer) expect(name string, n int64) error {
	if w.next >= len(w.specs) {
		return fmt.Errorf("safetensors: tensor %q written after all %d tensors", name, len(w.specs))
	}
	s := w.specs[w.next]
	if s.Name != name {
		return fmt.Errorf("safetensors: tensor %q written out of order, want %q", name, s.Name)
	}
	if n != s.Bytes() {
		return fmt.Errorf("safetensors: tensor %q: %d bytes, want %d", name, n, s.Bytes())
	}
	return nil
}

// WriteTensor writes the raw little-endian bytes of the next tensor, which must be named name.
func (w *Writer) WriteTensor(name string, data []byte) error {
	if err := w.expect(name, int64(len(data))); err != nil {
		return err
	}
	if _, err := w.w.Write(data); err != nil {
		return fmt.Errorf("safetensors: write tensor %q: %w", name, err)
	}
	w.next++
	return nil
}

// WriteFloat32 encodes src in the next tensor's dtype (F32, F16 or BF16) and writes it. F32 on a
// little-endian host is written straight from src; the 16-bit types are converted (over all
// cores) writeChunk values at a time into a buffer the Writer reuses. The io.Writer must not
// retain the slices it is given, as io.Writer requires.
func (w *Writer) WriteFloat32(name string, src []float32) error {
	if w.next >= len(w.specs) {
		return fmt.Errorf("safetensors: tensor %q written after all %d tensors", name, len(w.specs))
	}
	dt := w.specs[w.next].DType
	if !canEncode(dt) {
		return fmt.Errorf("safetensors: tensor %q: safetensors: cannot encode float32 as %s", name, dt)
	}
	if fb, ok := float32Bytes(src); ok && dt == F32 {
		return w.WriteTensor(name, fb)
	}
	size := dt.Size()
	if err := w.expect(name, int64(len(src))*int64(size)); err != nil {
		return err
	}
	for lo := 0; lo < len(src); lo += writeChunk {
		part := src[lo:min(lo+writeChunk, len(src))]
		if cap(w.scratch) < len(part)*size {
			w.scratch = make([]byte, min(writeChunk, len(src))*size)
		}
		b := w.scratch[:len(part)*size]
		encodeInto(dt, b, part)
		if _, err := w.w.Write(b); err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", name, err)
		}
	}
	w.next++
	return nil
}

// Close checks that every tensor was written.
func (w *Writer) Close() error {
	if w.next != len(w.specs) {
		return fmt.Errorf("safetensors: %d of %d tensors written", w.next, len(w.specs))
	}
	return nil
}
