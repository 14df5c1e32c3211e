package schemas

import (
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow/go/v17/arrow"
)

// The Arrow IPC reader trusts its input: a corrupt flatbuffer vector length or message length
// makes it allocate whatever the bytes say (a fatal out-of-memory, not a recoverable panic), and
// array lengths are not checked against buffer sizes. Kafka payloads are outside input, so
// DecodeBatch runs two guards: preflightIPC checks the stream framing and every flatbuffer length
// the reader will allocate from, before the reader sees the bytes; checkArray checks that every
// array the decoder reads is backed by buffers of the right size.

// Limits of the flatbuffer walk (far above anything the trajectory schema needs).
const (
	maxFieldDepth = 32
	maxFields     = 4096
)

// Arrow Message header types (format/Message.fbs).
const (
	fbHeaderSchema          = 1
	fbHeaderDictionaryBatch = 2
	fbHeaderRecordBatch     = 3
)

// preflightIPC walks an IPC stream and verifies message framing and metadata bounds.
func preflightIPC(data []byte) error {
	pos := 0
	schemas := 0
	for msg := 0; ; msg++ {
		if pos == len(data) {
			return nil // end of stream without an EOS marker is accepted, like the reader does
		}
		if pos+4 > len(data) {
			return fmt.Errorf("message %d: truncated continuation marker", msg)
		}
		cid := binary.LittleEndian.Uint32(data[pos:])
		pos += 4
		var metaLen int64
		switch cid {
		case 0:
			return nil
		case 0xFFFFFFFF:
			if pos+4 > len(data) {
				return fmt.Errorf("message %d: truncated length", msg)
			}
			metaLen = int64(int32(binary.LittleEndian.Uint32(data[pos:])))
			pos += 4
			if metaLen == 0 {
				return nil
			}
		default:
			metaLen = int64(int32(cid)) // pre-0.15 framing without continuation marker
		}
		if metaLen < 0 || metaLen > int64(len(data)-pos) {
			return fmt.Errorf("message %d: metadata length %d exceeds the %d bytes left", msg, metaLen, len(data)-pos)
		}
		fb := fbuf(data[pos : pos+int(metaLen)])
		pos += int(metaLen)
		htype, body, err := checkMessage(fb)
		if err != nil {
			return fmt.Errorf("message %d: %w", msg, err)
		}
		if htype == fbHeaderSchema {
			schemas++
			if schemas > 1 {
				return fmt.Errorf("message %d: second schema message", msg)
			}
		} else if schemas == 0 {
			return fmt.Errorf("message %d: data before the schema", msg)
		}
		if body < 0 || body > int64(len(data)-pos) {
			return fmt.Errorf("message %d: body length %d exceeds the %d bytes left", msg, body, len(data)-pos)
		}
		pos += int(body)
	}
}

// fbuf is a flatbuffer with bounds-checked accessors that return errors instead of panicking.
type fbuf []byte

type fbTable struct {
	b          fbuf
	pos, vt, n int // table position, vtable position, vtable length in bytes
}

func (b fbuf) u32(pos int) (uint32, error) {
	if pos < 0 || pos+4 > len(b) {
		return 0, fmt.Errorf("flatbuffer offset %d out of %d bytes", pos, len(b))
	}
	return binary.LittleEndian.Uint32(b[pos:]), nil
}

func (b fbuf) table(pos int) (fbTable, error) {
	so, err := b.u32(pos)
	if err != nil {
		return fbTable{}, err
	}
	vt := int64(pos) - int64(int32(so))
	if vt < 0 || vt+4 > int64(len(b)) {
		return fbTable{}, fmt.Errorf("flatbuffer vtable at %d out of %d bytes", vt, len(b))
	}
	n := int(binary.LittleEndian.Uint16(b[vt:]))
	if n < 4 || n%2 != 0 || vt+int64(n) > int64(len(b)) {
		return fbTable{}, fmt.Errorf("flatbuffer vtable length %d at %d invalid", n, vt)
	}
	return fbTable{b: b, pos: pos, vt: int(vt), n: n}, nil
}

// field returns the absolute position of slot's value (size bytes), or ok=false when absent.
func (t fbTable) field(slot, size int) (int, bool, error) {
	e := 4 + 2*slot
	if e+2 > t.n {
		return 0, false, nil
	}
	off := int(binary.LittleEndian.Uint16(t.b[t.vt+e:]))
	if off == 0 {
		return 0, false, nil
	}
	p := t.pos + off
	if p+size > len(t.b) {
		return 0, false, fmt.Errorf("flatbuffer field %d at %d out of %d bytes", slot, p, len(t.b))
	}
	return p, true, nil
}

func (t fbTable) u8(slot int) (uint8, error) {
	p, ok, err := t.field(slot, 1)
	if !ok || err != nil {
		return 0, err
	}
	return t.b[p], nil
}

func (t fbTable) i64(slot int) (int64, error) {
	p, ok, err := t.field(slot, 8)
	if !ok || err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(t.b[p:])), nil
}

// ref follows a uoffset stored at position p.
func (b fbuf) ref(p int) (int, error) {
	u, err := b.u32(p)
	if err != nil {
		return 0, err
	}
	q := int64(p) + int64(u)
	if q >= int64(len(b)) {
		return 0, fmt.Errorf("flatbuffer reference to %d out of %d bytes", q, len(b))
	}
	return int(q), nil
}

func (t fbTable) sub(slot int) (fbTable, bool, error) {
	p, ok, err := t.field(slot, 4)
	if !ok || err != nil {
		return fbTable{}, false, err
	}
	q, err := t.b.ref(p)
	if err != nil {
		return fbTable{}, false, err
	}
	st, err := t.b.table(q)
	return st, err == nil, err
}

// vector returns the start and length of a vector of elem-byte elements, checking it fits.
func (t fbTable) vector(slot, elem int) (start, n int, err error) {
	p, ok, err := t.field(slot, 4)
	if !ok || err != nil {
		return 0, 0, err
	}
	q, err := t.b.ref(p)
	if err != nil {
		return 0, 0, err
	}
	l, err := t.b.u32(q)
	if err != nil {
		return 0, 0, err
	}
	if int64(q)+4+int64(l)*int64(elem) > int64(len(t.b)) {
		return 0, 0, fmt.Errorf("flatbuffer vector of %d×%d bytes at %d out of %d bytes", l, elem, q, len(t.b))
	}
	return q + 4, int(l), nil
}

func (t fbTable) str(slot int) error {
	_, _, err := t.vector(slot, 1)
	return err
}

// tables checks a vector of tables with check applied to each element.
func (t fbTable) tables(slot int, check func(fbTable) error) error {
	start, n, err := t.vector(slot, 4)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		q, err := t.b.ref(start + 4*i)
		if err != nil {
			return err
		}
		et, err := t.b.table(q)
		if err != nil {
			return err
		}
		if err := check(et); err != nil {
			return err
		}
	}
	return nil
}

func checkKeyValue(kv fbTable) error {
	if err := kv.str(0); err != nil {
		return err
	}
	return kv.str(1)
}

// checkMessage verifies a Message flatbuffer and returns its header type and body length.
func checkMessage(b fbuf) (htype uint8, body int64, err error) {
	root, err := b.ref(0)
	if err != nil {
		return 0, 0, err
	}
	m, err := b.table(root)
	if err != nil {
		return 0, 0, err
	}
	if htype, err = m.u8(1); err != nil {
		return 0, 0, err
	}
	if body, err = m.i64(3); err != nil {
		return 0, 0, err
	}
	if err := m.tables(4, checkKeyValue); err != nil {
		return 0, 0, err
	}
	h, ok, err := m.sub(2)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("message without header")
	}
	switch htype {
	case fbHeaderSchema:
		fields := 0
		err = checkSchema(h, &fields)
	case fbHeaderRecordBatch:
		err = checkRecordBatch(h)
	case fbHeaderDictionaryBatch:
		var rb fbTable
		if rb, ok, err = h.sub(1); err == nil && ok {
			err = checkRecordBatch(rb)
		}
	default:
		err = fmt.Errorf("unsupported message header type %d", htype)
	}
	return htype, body, err
}

func checkSchema(s fbTable, count *int) error {
	if err := s.tables(2, checkKeyValue); err != nil {
		return err
	}
	if _, _, err := s.vector(3, 8); err != nil {
		return err
	}
	return s.tables(1, func(f fbTable) error { return checkField(f, 0, count) })
}

func checkField(f fbTable, depth int, count *int) error {
	*count++
	if *count > maxFields {
		return fmt.Errorf("more than %d fields", maxFields)
	}
	if depth > maxFieldDepth {
		return fmt.Errorf("fields nested deeper than %d", maxFieldDepth)
	}
	if err := f.str(0); err != nil {
		return err
	}
	if _, _, err := f.sub(3); err != nil { // type
		return err
	}
	if d, ok, err := f.sub(4); err != nil { // dictionary encoding
		return err
	} else if ok {
		if _, _, err := d.sub(1); err != nil { // index type
			return err
		}
	}
	if err := f.tables(6, checkKeyValue); err != nil {
		return err
	}
	return f.tables(5, func(c fbTable) error { return checkField(c, depth+1, count) })
}

func checkRecordBatch(rb fbTable) error {
	n, err := rb.i64(0)
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("negative record batch length %d", n)
	}
	if _, ok, err := rb.sub(3); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("compressed record batch (payloads must be uncompressed Arrow IPC)")
	}
	if _, _, err := rb.vector(1, 16); err != nil { // FieldNode structs
		return err
	}
	if _, _, err := rb.vector(2, 16); err != nil { // Buffer structs
		return err
	}
	_, _, err = rb.vector(4, 8)
	return err
}

// checkArray verifies that an array's buffers hold everything its length and offsets claim, for
// the types the decoder reads (recursively). Types it does not know are left alone: the decoder
// never reads them (unknown columns of a newer minor).
func checkArray(a arrow.ArrayData, depth int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("nested deeper than %d", maxFieldDepth)
	}
	off, n := int64(a.Offset()), int64(a.Len())
	if off < 0 || n < 0 {
		return fmt.Errorf("negative offset %d or length %d", off, n)
	}
	end := off + n
	bufs := a.Buffers()
	bufLen := func(i int) int64 {
		if i >= len(bufs) || bufs[i] == nil {
			return 0
		}
		return int64(bufs[i].Len())
	}
	if a.NullN() != 0 && len(bufs) > 0 && bufs[0] != nil && bufLen(0) < (end+7)/8 {
		return fmt.Errorf("validity bitmap of %d bytes for %d slots", bufLen(0), end)
	}
	dt := a.DataType()
	switch dt.ID() {
	case arrow.BOOL:
		if bufLen(1) < (end+7)/8 {
			return fmt.Errorf("bool data of %d bytes for %d values", bufLen(1), end)
		}
	case arrow.INT8, arrow.UINT8, arrow.INT16, arrow.UINT16, arrow.INT32, arrow.UINT32,
		arrow.INT64, arrow.UINT64, arrow.FLOAT32, arrow.FLOAT64, arrow.TIMESTAMP:
		w := int64(dt.(arrow.FixedWidthDataType).BitWidth() / 8)
		if bufLen(1) < end*w {
			return fmt.Errorf("%s data of %d bytes for %d values", dt, bufLen(1), end)
		}
	case arrow.STRING, arrow.BINARY:
		return checkOffsets(a, bufLen(1), bufLen(2), "string")
	case arrow.LIST, arrow.MAP:
		ch := a.Children()
		if len(ch) != 1 {
			return fmt.Errorf("%s with %d children", dt, len(ch))
		}
		if err := checkOffsets(a, bufLen(1), int64(ch[0].Len()), "list"); err != nil {
			return err
		}
		return checkArray(ch[0], depth+1)
	case arrow.STRUCT:
		for i, c := range a.Children() {
			if int64(c.Len()) < end {
				return fmt.Errorf("struct child %d has %d values for %d slots", i, c.Len(), end)
			}
			if err := checkArray(c, depth+1); err != nil {
				return fmt.Errorf("struct child %d: %w", i, err)
			}
		}
	}
	return nil
}

// checkOffsets verifies an int32 offsets buffer: n+1 entries, non-decreasing, within [0, limit].
func checkOffsets(a arrow.ArrayData, offBytes, limit int64, what string) error {
	off, n := a.Offset(), a.Len()
	if offBytes < int64(off+n+1)*4 {
		if n == 0 && offBytes == 0 {
			return nil // an empty array may omit its offsets
		}
		return fmt.Errorf("%s offsets of %d bytes for %d values", what, offBytes, off+n)
	}
	offs := arrow.Int32Traits.CastFromBytes(a.Buffers()[1].Bytes())[off : off+n+1]
	prev := offs[0]
	if prev < 0 || int64(prev) > limit {
		return fmt.Errorf("%s offset %d outside [0,%d]", what, prev, limit)
	}
	for _, o := range offs[1:] {
		if o < prev || int64(o) > limit {
			return fmt.Errorf("%s offsets not increasing within [0,%d] (%d after %d)", what, limit, o, prev)
		}
		prev = o
	}
	return nil
}
