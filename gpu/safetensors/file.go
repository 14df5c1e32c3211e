package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// File is an open safetensors file. Tensors are read on demand with ReadAt.
type File struct {
	Header *Header
	path   string
	r      io.ReaderAt
	closer io.Closer
	start  int64
}

// Open opens and validates a safetensors file.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	sf, err := NewFile(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sf.path, sf.closer = path, f
	return sf, nil
}

// NewFile reads the header of a safetensors image of the given size held by r.
func NewFile(r io.ReaderAt, size int64) (*File, error) {
	h, start, err := ReadHeader(r, size)
	if err != nil {
		return nil, err
	}
	return &File{Header: h, r: r, start: start}, nil
}

// Close closes the underlying file, if Open opened it.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	return f.closer.Close()
}

// Raw returns the encoded bytes of the named tensor.
func (f *File) Raw(name string) (TensorInfo, []byte, error) {
	t, ok := f.Header.Lookup(name)
	if !ok {
		return TensorInfo{}, nil, fmt.Errorf("safetensors: %s: no tensor %q", f.path, name)
	}
	b := make([]byte, t.End-t.Begin)
	if err := f.readAt(b, t.Begin, name); err != nil {
		return TensorInfo{}, nil, err
	}
	return t, b, nil
}

// Float32 returns the named tensor converted to float32 and its shape. F32 data is read straight
// into the result on a little-endian host; other types are read readChunk bytes at a time and
// converted over all cores, so a tensor never needs its encoded bytes and its float32 values in
// memory at once.
func (f *File) Float32(name string) ([]float32, []int, error) {
	t, ok := f.Header.Lookup(name)
	if !ok {
		return nil, nil, fmt.Errorf("safetensors: %s: no tensor %q", f.path, name)
	}
	switch t.DType {
	case F64, F32, F16, BF16:
	default:
		return nil, nil, fmt.Errorf("safetensors: %s: tensor %q: safetensors: cannot decode %s as float32", f.path, name, t.DType)
	}
	n := t.NumElements()
	size := int64(t.DType.Size())
	if n*size != t.End-t.Begin { // ParseHeader guarantees it; a hand-built Header may not
		return nil, nil, fmt.Errorf("safetensors: %s: tensor %q: %d bytes for %d values of %s", f.path, name, t.End-t.Begin, n, t.DType)
	}
	dst := make([]float32, n)
	if fb, ok := float32Bytes(dst); ok && t.DType == F32 {
		if err := f.readAt(fb, t.Begin, name); err != nil {
			return nil, nil, err
		}
		return dst, t.Shape, nil
	}
	per := readChunk / size
	bp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bp)
	buf := *bp
	for lo := int64(0); lo < n; lo += per {
		hi := min(lo+per, n)
		b := buf[:(hi-lo)*size]
		if err := f.readAt(b, t.Begin+lo*size, name); err != nil {
			return nil, nil, err
		}
		if err := Decode(t.DType, b, dst[lo:hi]); err != nil {
			return nil, nil, fmt.Errorf("safetensors: %s: tensor %q: %w", f.path, name, err)
		}
	}
	return dst, t.Shape, nil
}

// readChunk is how many encoded bytes Float32 reads before converting them.
const readChunk = 8 << 20

// chunkPool holds Float32's read buffers (readChunk bytes), so loading a checkpoint of hundreds
// of tensors reuses a few instead of allocating one per tensor.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// readAt fills b from the data buffer at offset off (relative to its start).
func (f *File) readAt(b []byte, off int64, name string) error {
	if _, err := f.r.ReadAt(b, f.start+off); err != nil && !(errors.Is(err, io.EOF) && len(b) == 0) {
		return fmt.Errorf("safetensors: %s: read %q: %w", f.path, name, err)
	}
	return nil
}

// IndexFile is the name of the sharded-checkpoint index transformers writes and reads.
const IndexFile = "model.safetensors.index.json"

// SingleFile is the name of an unsharded checkpoint's weights.
const SingleFile = "model.safetensors"

// Index is the JSON of model.safetensors.index.json.
type Index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// Dir is a checkpoint directory's weights: one file or several shards behind an index.
type Dir struct {
	files  map[string]*File // shard file name → file
	byName map[string]*File // tensor name → file holding it
	names  []string
}

// OpenDir opens the weights of a Hugging Face checkpoint directory: model.safetensors.index.json
// with its shards if present, else model.safetensors. Every shard's header is validated and every
// tensor of the index must be in the shard it names.
func OpenDir(dir string) (*Dir, error) {
	d := &Dir{files: map[string]*File{}, byName: map[string]*File{}}
	ib, err := os.ReadFile(filepath.Join(dir, IndexFile))
	switch {
	case err == nil:
		var idx Index
		if err := json.Unmarshal(ib, &idx); err != nil {
			return nil, fmt.Errorf("safetensors: %s: %w", filepath.Join(dir, IndexFile), err)
		}
		if len(idx.WeightMap) == 0 {
			return nil, fmt.Errorf("safetensors: %s: empty weight_map", filepath.Join(dir, IndexFile))
		}
		for name, shard := range idx.WeightMap {
			if shard == "" || strings.ContainsAny(shard, `/\`) || shard == "." || shard == ".." {
				d.Close()
				return nil, fmt.Errorf("safetensors: index maps %q to bad shard name %q", name, shard)
			}
			f, ok := d.files[shard]
			if !ok {
				f, err = Open(filepath.Join(dir, shard))
				if err != nil {
					d.Close()
					return nil, err
				}
				d.files[shard] = f
			}
			if _, ok := f.Header.Lookup(name); !ok {
				d.Close()
				return nil, fmt.Errorf("safetensors: index says %q is in %s, but it is not", name, shard)
			}
			d.byName[name] = f
		}
	case errors.Is(err, os.ErrNotExist):
		f, err := Open(filepath.Join(dir, SingleFile))
		if err != nil {
			return nil, err
		}
		d.files[SingleFile] = f
		for _, t := range f.Header.Tensors {
			d.byName[t.Name] = f
		}
	default:
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	for n := range d.byName {
		d.names = append(d.names, n)
	}
	sort.Strings(d.names)
	return d, nil
}

// Names lists the tensor names, sorted.
func (d *Dir) Names() []string { return d.names }

// Info describes the named tensor.
func (d *Dir) Info(name string) (TensorInfo, bool) {
	f, ok := d.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Header.Lookup(name)
}

// Float32 reads the named tensor as float32.
func (d *Dir) Float32(name string) ([]float32, []int, error) {
	f, ok := d.byName[name]
	if !ok {
		return nil, nil, fmt.Errorf("safetensors: no tensor %q in checkpoint", name)
	}
	return f.Float32(name)
}

// Close closes every shard.
func (d *Dir) Close() error {
	var errs []error
	for _, f := range d.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
