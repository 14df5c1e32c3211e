package pyjson

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Options select the json.dumps variant. The zero value is Python's default
// json.dumps(obj): separators ", " and ": ", ensure_ascii=True, insertion
// order — exactly τ²'s to_json_str.
type Options struct {
	// SortKeys sorts object keys by code point (json.dumps(sort_keys=True)),
	// as τ²'s DB hash does.
	SortKeys bool
	// UTF8 disables ensure_ascii: non-ASCII characters are written as UTF-8
	// instead of \uXXXX escapes.
	UTF8 bool
}

// Marshaler is implemented by domain types whose Python dump is not the
// plain field-by-field dump of the Go struct (discriminated unions, dates).
// MarshalPy returns any value Dumps can encode, typically an *Object built
// in the pydantic field order.
type Marshaler interface {
	MarshalPy() (any, error)
}

// Dumps encodes v like Python's json.dumps(v) (see Options for the exact
// defaults). v may be a generic value (as returned by Loads), a Go struct
// (fields in declaration order, named by their `json` tag: pydantic's
// model_dump order, None fields included as null), a Map/Table, a slice, or
// a Marshaler.
func Dumps(v any) (string, error) {
	b, err := Append(nil, v, Options{})
	return string(b), err
}

// DumpsSorted is json.dumps(v, sort_keys=True).
func DumpsSorted(v any) (string, error) {
	b, err := Append(nil, v, Options{SortKeys: true})
	return string(b), err
}

// MustDumps is Dumps for values known to be encodable (tests, constants); it
// panics on error.
func MustDumps(v any) string {
	s, err := Dumps(v)
	if err != nil {
		panic(err)
	}
	return s
}

// Hash returns τ²'s get_dict_hash of v: the hex sha256 of
// json.dumps(v, sort_keys=True, default=str).
func Hash(v any) (string, error) {
	h := sha256.New()
	e := &encoder{opt: Options{SortKeys: true}, sink: h}
	b, err := e.value(make([]byte, 0, flushSize+4096), reflect.ValueOf(v), 0)
	if err != nil {
		return "", err
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// flushSize is the buffered size at which a streaming encoder (Hash) hands
// its bytes to the sink.
const flushSize = 64 << 10

// Append appends the encoding of v to dst.
func Append(dst []byte, v any, opt Options) ([]byte, error) {
	e := &encoder{opt: opt}
	return e.value(dst, reflect.ValueOf(v), 0)
}

// pyAppender lets package types (Table) encode themselves efficiently.
type pyAppender interface {
	appendPy(e *encoder, dst []byte, depth int) ([]byte, error)
}

type encoder struct {
	opt Options
	// sink, when set, receives the encoded bytes in order whenever the
	// buffer passes flushSize (at record boundaries of large tables), so a
	// 7 MB DB is hashed without materializing its dump.
	sink io.Writer
}

// flush hands dst to the sink when it is large; encoders only ever append
// to dst, so earlier bytes are never needed again.
func (e *encoder) flush(dst []byte) []byte {
	if e.sink == nil || len(dst) < flushSize {
		return dst
	}
	e.sink.Write(dst)
	return dst[:0]
}

const maxEncodeDepth = 10000

var (
	marshalerType  = reflect.TypeFor[Marshaler]()
	appenderType   = reflect.TypeFor[pyAppender]()
	mapLikeType    = reflect.TypeFor[mapLike]()
	errUnencodable = fmt.Errorf("pyjson: value is not JSON serializable")
)

// addressable returns a pointer-capable view of v so pointer-receiver
// methods (Map, Table) can be used on struct fields held by value.
func addressable(v reflect.Value) reflect.Value {
	if v.CanAddr() {
		return v.Addr()
	}
	p := reflect.New(v.Type())
	p.Elem().Set(v)
	return p
}

func (e *encoder) value(dst []byte, v reflect.Value, depth int) ([]byte, error) {
	if depth > maxEncodeDepth {
		return dst, fmt.Errorf("pyjson: maximum nesting depth exceeded")
	}
	if !v.IsValid() {
		return append(dst, "null"...), nil
	}
	// Fast paths for the generic value types produced by Loads.
	switch x := v.Interface().(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendString(dst, x, !e.opt.UTF8), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case float64:
		return appendJSONFloat(dst, x), nil
	case *big.Int:
		if x == nil {
			return append(dst, "null"...), nil
		}
		return x.Append(dst, 10), nil
	case []any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, el := range x {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			var err error
			if dst, err = e.value(dst, reflect.ValueOf(el), depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	t := v.Type()
	if t.Implements(appenderType) {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return append(dst, "null"...), nil
		}
		return v.Interface().(pyAppender).appendPy(e, dst, depth+1)
	}
	if t.Implements(marshalerType) {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return append(dst, "null"...), nil
		}
		m, err := v.Interface().(Marshaler).MarshalPy()
		if err != nil {
			return dst, fmt.Errorf("pyjson: %s.MarshalPy: %w", t, err)
		}
		return e.value(dst, reflect.ValueOf(m), depth+1)
	}
	if t.Implements(mapLikeType) {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return append(dst, "null"...), nil
		}
		return e.mapLike(dst, v.Interface().(mapLike), depth)
	}
	if v.Kind() == reflect.Struct {
		pt := reflect.PointerTo(t)
		if pt.Implements(appenderType) || pt.Implements(marshalerType) || pt.Implements(mapLikeType) {
			return e.value(dst, addressable(v), depth)
		}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		return e.value(dst, v.Elem(), depth+1)
	case reflect.String:
		return appendString(dst, v.String(), !e.opt.UTF8), nil
	case reflect.Bool:
		if v.Bool() {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.AppendUint(dst, v.Uint(), 10), nil
	case reflect.Float32, reflect.Float64:
		return appendJSONFloat(dst, v.Float()), nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			var err error
			if dst, err = e.value(dst, v.Index(i), depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case reflect.Struct:
		return e.structValue(dst, v, depth)
	case reflect.Map:
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		if t.Key().Kind() != reflect.String {
			return dst, fmt.Errorf("%w: map key type %s", errUnencodable, t.Key())
		}
		if !e.opt.SortKeys {
			// A Go map has no order; encoding it would silently invent one.
			return dst, fmt.Errorf("%w: unordered Go map %s (use pyjson.Map)", errUnencodable, t)
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = appendString(dst, k, !e.opt.UTF8)
			dst = append(dst, ": "...)
			var err error
			if dst, err = e.value(dst, v.MapIndex(reflect.ValueOf(k).Convert(t.Key())), depth+1); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("%w: %s", errUnencodable, t)
}

func (e *encoder) mapLike(dst []byte, m mapLike, depth int) ([]byte, error) {
	dst = append(dst, '{')
	if !e.opt.SortKeys {
		first := true
		err := m.pyRange(func(k string, val any) error {
			if !first {
				dst = append(dst, ", "...)
			}
			first = false
			dst = appendString(dst, k, !e.opt.UTF8)
			dst = append(dst, ": "...)
			var err error
			dst, err = e.value(dst, reflect.ValueOf(val), depth+1)
			return err
		})
		if err != nil {
			return dst, err
		}
		return append(dst, '}'), nil
	}
	keys := make([]string, 0, m.pyLen())
	_ = m.pyRange(func(k string, _ any) error { keys = append(keys, k); return nil })
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendString(dst, k, !e.opt.UTF8)
		dst = append(dst, ": "...)
		val, _ := m.pyGet(k)
		var err error
		if dst, err = e.value(dst, reflect.ValueOf(val), depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// field describes one struct field as a pydantic model field.
type field struct {
	name     string
	index    []int
	optional bool // may be absent when decoding (pointer types are always optional)
}

type structInfo struct {
	fields []field
	sorted []int // indexes into fields, by name
	byName map[string]int
}

var structCache sync.Map // reflect.Type -> *structInfo

// structFields returns the model fields of t in declaration order; embedded
// structs without a tag are flattened (pydantic inheritance: base fields
// first). The `json:"name" pydantic:"optional"` tag marks a non-pointer field that may
// be missing on input (pydantic default); `json:"-"` skips a field.
func structFields(t reflect.Type) *structInfo {
	if si, ok := structCache.Load(t); ok {
		return si.(*structInfo)
	}
	si := &structInfo{byName: map[string]int{}}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			idx := append(slices.Clone(index), i)
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fl := field{name: name, index: idx, optional: f.Type.Kind() == reflect.Pointer}
			if f.Tag.Get("pydantic") == "optional" {
				fl.optional = true
			}
			if j, dup := si.byName[name]; dup {
				// A redefined field keeps the base position (pydantic).
				si.fields[j] = fl
				continue
			}
			si.byName[name] = len(si.fields)
			si.fields = append(si.fields, fl)
		}
	}
	walk(t, nil)
	si.sorted = make([]int, len(si.fields))
	for i := range si.sorted {
		si.sorted[i] = i
	}
	slices.SortFunc(si.sorted, func(a, b int) int {
		if si.fields[a].name < si.fields[b].name {
			return -1
		}
		if si.fields[a].name > si.fields[b].name {
			return 1
		}
		return 0
	})
	actual, _ := structCache.LoadOrStore(t, si)
	return actual.(*structInfo)
}

func (e *encoder) structValue(dst []byte, v reflect.Value, depth int) ([]byte, error) {
	si := structFields(v.Type())
	dst = append(dst, '{')
	order := si.sorted
	if !e.opt.SortKeys {
		order = nil
	}
	for n := range si.fields {
		i := n
		if order != nil {
			i = order[n]
		}
		f := si.fields[i]
		if n > 0 {
			dst = append(dst, ", "...)
		}
		dst = appendString(dst, f.name, !e.opt.UTF8)
		dst = append(dst, ": "...)
		var err error
		if dst, err = e.value(dst, v.FieldByIndex(f.index), depth+1); err != nil {
			return dst, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return append(dst, '}'), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string literal with Python's escaping:
// ensure_ascii escapes everything outside printable ASCII (space..~) as
// \uXXXX (lower-case hex, UTF-16 surrogate pairs above U+FFFF, lone
// surrogates kept); otherwise only '"', '\\' and control characters are
// escaped. Invalid UTF-8 bytes become U+FFFD.
func appendString(dst []byte, s string, ascii bool) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && (c < 0x7f || c == 0x7f && !ascii) {
			i++
			continue
		}
		if c >= 0x80 && !ascii {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 || isWTF8Surrogate(s, i) {
				if isWTF8Surrogate(s, i) {
					size = 3
				}
				i += size
				continue
			}
		}
		dst = append(dst, s[start:i]...)
		switch {
		case c == '"':
			dst = append(dst, '\\', '"')
			i++
		case c == '\\':
			dst = append(dst, '\\', '\\')
			i++
		case c == '\n':
			dst = append(dst, '\\', 'n')
			i++
		case c == '\r':
			dst = append(dst, '\\', 'r')
			i++
		case c == '\t':
			dst = append(dst, '\\', 't')
			i++
		case c == '\b':
			dst = append(dst, '\\', 'b')
			i++
		case c == '\f':
			dst = append(dst, '\\', 'f')
			i++
		case c < 0x80:
			dst = appendU(dst, rune(c))
			i++
		default:
			if isWTF8Surrogate(s, i) {
				r := rune(c&0x0f)<<12 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f)
				dst = appendU(dst, r)
				i += 3
				break
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				r = utf8.RuneError
			}
			if !ascii {
				dst = utf8.AppendRune(dst, r)
			} else if r >= 0x10000 {
				r -= 0x10000
				dst = appendU(dst, 0xd800+(r>>10))
				dst = appendU(dst, 0xdc00+(r&0x3ff))
			} else {
				dst = appendU(dst, r)
			}
			i += size
		}
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func isWTF8Surrogate(s string, i int) bool {
	return i+2 < len(s) && s[i] == 0xed && s[i+1] >= 0xa0 && s[i+1] <= 0xbf && s[i+2]&0xc0 == 0x80
}

func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[(r>>12)&0xf], hexDigits[(r>>8)&0xf], hexDigits[(r>>4)&0xf], hexDigits[r&0xf])
}

// appendJSONFloat writes f as json.dumps does: float.__repr__, with NaN,
// Infinity and -Infinity for the non-finite values.
func appendJSONFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	return AppendFloatRepr(dst, f)
}

// FloatRepr returns Python's repr(f) (also str(f)): the shortest digits that
// round-trip, in fixed notation when the decimal exponent is in [-4, 16)
// ("12.0", "0.0001", "1e+16", "1e-05"), and "inf", "-inf", "nan".
func FloatRepr(f float64) string { return string(AppendFloatRepr(nil, f)) }

// AppendFloatRepr appends FloatRepr(f) to dst.
func AppendFloatRepr(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "nan"...)
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	case f == 0:
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // -d.ddde±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	var digits []byte
	k := 0
	for ; k < len(e) && e[k] != 'e'; k++ {
		if e[k] != '.' {
			digits = append(digits, e[k])
		}
	}
	exp, _ := strconv.Atoi(string(e[k+1:]))
	decpt := exp + 1
	if neg {
		dst = append(dst, '-')
	}
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			dst = append(dst, '0', '.')
			for i := 0; i < -decpt; i++ {
				dst = append(dst, '0')
			}
			dst = append(dst, digits...)
		case decpt >= len(digits):
			dst = append(dst, digits...)
			for i := len(digits); i < decpt; i++ {
				dst = append(dst, '0')
			}
			dst = append(dst, '.', '0')
		default:
			dst = append(dst, digits[:decpt]...)
			dst = append(dst, '.')
			dst = append(dst, digits[decpt:]...)
		}
		return dst
	}
	dst = append(dst, digits[0])
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	x := decpt - 1
	if x < 0 {
		dst = append(dst, '-')
		x = -x
	} else {
		dst = append(dst, '+')
	}
	if x < 10 {
		dst = append(dst, '0')
	}
	return strconv.AppendInt(dst, int64(x), 10)
}

// Str returns Python's str(v) for the scalar types τ²'s to_json_str
// stringifies: int ("42"), float (repr: "12.0"), bool ("True"/"False"),
// None ("None"), str (itself).
func Str(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return FloatRepr(x)
	case *big.Int:
		return x.String()
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(rv.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		return FloatRepr(rv.Float())
	case reflect.Bool:
		return Str(rv.Bool())
	case reflect.String:
		return rv.String()
	}
	return fmt.Sprint(v)
}

// TypeName returns the Python type name of a generic value ("str", "int",
// "float", "bool", "NoneType", "list", "dict"), for error messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case string:
		return "str"
	case int, int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case []any:
		return "list"
	case *Object:
		return "dict"
	}
	return reflect.TypeOf(v).String()
}
