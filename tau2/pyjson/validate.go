package pyjson

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unmarshaler is implemented by domain types that validate themselves from a
// generic value (discriminated unions such as airline payment methods).
// Implementations report problems with *ValidationError where they can.
type Unmarshaler interface {
	UnmarshalPy(v any) error
}

// Defaulter is implemented by model structs with pydantic field defaults;
// SetDefaults is called on a fresh value before the input fields are applied.
type Defaulter interface {
	SetDefaults()
}

// ValidationError is a pydantic ValidationError: every problem found while
// validating one model. Its text follows pydantic's ("1 validation error
// for Payment\namount\n  Input should be a valid integer ..."), so tool
// errors read like τ²'s, down to the input_value= repr shortened to 50
// bytes (see InputRepr). Only the error flag of a tool message matters for
// rewards.
type ValidationError struct {
	Model  string // model name, e.g. "Reservation"; set by FromValue
	Errors []LineError
}

// LineError is one problem: where, what, and the offending input.
type LineError struct {
	Loc   []any  // field path: strings and list indexes
	Msg   string // e.g. "Field required"
	Type  string // pydantic error type, e.g. "missing"
	Input any    // offending input (generic value)
}

// PydanticVersion is the minor version quoted in error URLs (τ² locks
// pydantic 2.12.4).
const PydanticVersion = "2.12"

// NewValidationError returns a ValidationError with one problem.
func NewValidationError(model string, loc []any, msg, typ string, input any) *ValidationError {
	return &ValidationError{Model: model, Errors: []LineError{{Loc: loc, Msg: msg, Type: typ, Input: input}}}
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	model := e.Model
	if model == "" {
		model = "model"
	}
	n := len(e.Errors)
	if n == 1 {
		fmt.Fprintf(&b, "1 validation error for %s", model)
	} else {
		fmt.Fprintf(&b, "%d validation errors for %s", n, model)
	}
	for _, le := range e.Errors {
		b.WriteByte('\n')
		if len(le.Loc) > 0 {
			for i, l := range le.Loc {
				if i > 0 {
					b.WriteByte('.')
				}
				fmt.Fprint(&b, l)
			}
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "  %s [type=%s, input_value=%s, input_type=%s]", le.Msg, le.Type, InputRepr(le.Input), TypeName(le.Input))
		fmt.Fprintf(&b, "\n    For further information visit https://errors.pydantic.dev/%s/v/%s", PydanticVersion, le.Type)
	}
	return b.String()
}

// Repr returns Python's repr() of a generic value, as pydantic shows inputs.
func Repr(v any) string {
	switch x := v.(type) {
	case string:
		return pyStrRepr(x)
	case []any:
		parts := make([]string, len(x))
		for i, el := range x {
			parts[i] = Repr(el)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *Object:
		var b strings.Builder
		b.WriteByte('{')
		i := 0
		for k, val := range x.All() {
			if i > 0 {
				b.WriteString(", ")
			}
			i++
			b.WriteString(pyStrRepr(k))
			b.WriteString(": ")
			b.WriteString(Repr(val))
		}
		b.WriteByte('}')
		return b.String()
	}
	return Str(v)
}

// InputReprLimit is the byte length above which pydantic shortens the
// input_value= of a validation error (pydantic-core's
// write_truncated_to_limited_bytes(…, 50) in ValLineError::pretty).
const InputReprLimit = 50

// InputRepr returns the input_value= text pydantic shows for v: Python's
// repr(v), shortened by TruncateRepr when it is longer than InputReprLimit
// bytes. Tool errors the agent reads depend on it, e.g. a list holding a
// long string, or the whole argument dict of a "Field required" error.
func InputRepr(v any) string {
	return TruncateRepr(Repr(v), InputReprLimit)
}

// TruncateRepr shortens s as pydantic-core does when s is longer than limit
// bytes (UTF-8, not characters): the bytes before ceil(limit/2), cut back to
// a character boundary, then "...", then the last ceil(limit/2)-1 bytes, cut
// forward to a character boundary. For limit 50 that is at most 25 + 3 + 24
// bytes, fewer where a multi-byte character straddles a cut. A string of at
// most limit bytes is returned unchanged, and so is any string when limit
// is negative.
func TruncateRepr(s string, limit int) string {
	if limit < 0 || len(s) <= limit {
		return s
	}
	mid := (limit + 1) / 2
	head := floorCharBoundary(s, mid)
	tail := ceilCharBoundary(s, len(s)-(mid-1))
	return s[:head] + "..." + s[tail:]
}

// floorCharBoundary is Rust's str::floor_char_boundary as pydantic-core
// copies it: the largest character start at or before i, looking back at
// most 3 bytes (len(s) when i is past the end).
func floorCharBoundary(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for j := i; j >= 0 && j >= i-3; j-- {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	// Not valid UTF-8 (Repr never produces this): cut at i as bytes.
	return i
}

// ceilCharBoundary is Rust's str::ceil_char_boundary as pydantic-core
// copies it: the smallest character start at or after i, looking ahead at
// most 3 bytes (capped at len(s)).
func ceilCharBoundary(s string, i int) int {
	upper := min(i+4, len(s))
	for j := i; j < upper; j++ {
		if utf8.RuneStart(s[j]) {
			return j
		}
	}
	return upper
}

// pyStrRepr is Python's repr(str) (CPython's unicode_repr): single quotes
// unless the text contains a single quote and no double quote; backslash,
// the quote, \t, \n and \r escaped; other ASCII controls as \xhh; non-ASCII
// characters kept when printable (str.isprintable: letters, marks, numbers,
// punctuation, symbols) and otherwise escaped as \xhh, \uhhhh or
// \Uhhhhhhhh. Lone surrogates (kept by Loads as WTF-8) come out as \udxxx,
// as Python shows them. Bytes that are not UTF-8 at all cannot occur in a
// Python str; they are shown as U+FFFD. Printability follows Go's Unicode
// tables (unicode.Version), which may differ from the Python build's for
// characters assigned in between.
func pyStrRepr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b := make([]byte, 0, len(s)+2)
	b = append(b, q)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == q || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		if isWTF8Surrogate(s, i) {
			r := rune(c&0x0f)<<12 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f)
			b = appendU(b, r)
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case unicode.IsPrint(r):
			b = utf8.AppendRune(b, r)
		case r <= 0xff:
			b = append(b, '\\', 'x', hexDigits[r>>4], hexDigits[r&0xf])
		case r <= 0xffff:
			b = appendU(b, r)
		default:
			b = append(b, '\\', 'U')
			for shift := 28; shift >= 0; shift -= 4 {
				b = append(b, hexDigits[(r>>shift)&0xf])
			}
		}
	}
	b = append(b, q)
	return string(b)
}

// Unmarshal parses JSON text and validates it into out (a pointer), like
// pydantic's Model.model_validate_json.
func Unmarshal(data []byte, out any) error {
	v, err := Loads(string(data))
	if err != nil {
		return err
	}
	return FromValue(v, out)
}

// FromValue validates a generic value into out (a pointer), like pydantic's
// Model.model_validate in lax mode:
//   - struct fields are matched by their `json` tag; missing fields are an
//     error unless the field is a pointer or tagged `,optional` (an optional
//     field also accepts null, leaving the zero value or default); unknown
//     keys are ignored; Defaulter sets defaults first;
//   - str fields need a str; int fields take ints, integral floats, bools and
//     integer strings; float fields take ints, floats, bools and numeric
//     strings (a string holding a lone surrogate is pydantic's
//     string_unicode error there); bool fields need a bool; lists need a
//     list;
//   - Map fields take an object (order kept), any/interface fields take the
//     value as is; Unmarshaler types validate themselves.
func FromValue(v any, out any) error {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("pyjson: FromValue needs a non-nil pointer, got %T", out)
	}
	var errs []LineError
	if err := fromValueRV(v, rv.Elem(), nil, &errs); err != nil {
		return err
	}
	if len(errs) > 0 {
		return &ValidationError{Model: modelName(rv.Elem().Type()), Errors: errs}
	}
	return nil
}

func modelName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// fromValue validates into out (a pointer) and returns a ValidationError
// (without model name) for the problems found.
func fromValue(v any, out any, path []any) error {
	var errs []LineError
	if err := fromValueRV(v, reflect.ValueOf(out).Elem(), path, &errs); err != nil {
		return err
	}
	if len(errs) > 0 {
		return &ValidationError{Errors: errs}
	}
	return nil
}

var (
	unmarshalerType = reflect.TypeFor[Unmarshaler]()
	pyDecoderType   = reflect.TypeFor[pyDecoder]()
	defaulterType   = reflect.TypeFor[Defaulter]()
)

// fromValueRV validates v into dst, appending validation problems to errs
// (pydantic reports all of them); the returned error is reserved for
// programming errors (unsupported destination types).
func fromValueRV(v any, dst reflect.Value, path []any, errs *[]LineError) error {
	t := dst.Type()
	pt := reflect.PointerTo(t)
	if pt.Implements(pyDecoderType) {
		return collect(dst.Addr().Interface().(pyDecoder).decodePy(v, path), nil, errs)
	}
	if pt.Implements(unmarshalerType) {
		return collect(dst.Addr().Interface().(Unmarshaler).UnmarshalPy(v), path, errs)
	}
	invalid := func(msg, typ string) error {
		*errs = append(*errs, LineError{Loc: append([]any{}, path...), Msg: msg, Type: typ, Input: v})
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		if v == nil {
			dst.SetZero()
			return nil
		}
		rv := reflect.ValueOf(v)
		if !rv.Type().AssignableTo(t) {
			return invalid("Input has the wrong type", "is_instance_of")
		}
		dst.Set(rv)
		return nil
	case reflect.Pointer:
		if v == nil {
			dst.SetZero()
			return nil
		}
		p := reflect.New(t.Elem())
		n := len(*errs)
		if err := fromValueRV(v, p.Elem(), path, errs); err != nil {
			return err
		}
		if len(*errs) == n {
			dst.Set(p)
		}
		return nil
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return invalid("Input should be a valid string", "string_type")
		}
		dst.SetString(s)
		return nil
	case reflect.Bool:
		b, err := toBool(v)
		if err != nil {
			return invalid(err.msg, err.typ)
		}
		dst.SetBool(b)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := toInt(v)
		if err != nil {
			return invalid(err.msg, err.typ)
		}
		if dst.OverflowInt(n) {
			return invalid("Input should be a valid integer", "int_type")
		}
		dst.SetInt(n)
		return nil
	case reflect.Float32, reflect.Float64:
		f, err := toFloat(v)
		if err != nil {
			return invalid(err.msg, err.typ)
		}
		dst.SetFloat(f)
		return nil
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			return invalid("Input should be a valid list", "list_type")
		}
		s := reflect.MakeSlice(t, len(l), len(l))
		for i, el := range l {
			if err := fromValueRV(el, s.Index(i), append(path, i), errs); err != nil {
				return err
			}
		}
		dst.Set(s)
		return nil
	case reflect.Struct:
		o, ok := v.(*Object)
		if !ok {
			return invalid("Input should be a valid dictionary or instance of "+t.Name(), "model_type")
		}
		fresh := reflect.New(t).Elem()
		if pt.Implements(defaulterType) {
			fresh.Addr().Interface().(Defaulter).SetDefaults()
		}
		si := structFields(t)
		for _, f := range si.fields {
			fv, present := o.Get(f.name)
			if !present || (fv == nil && f.optional) {
				if f.optional {
					continue
				}
				*errs = append(*errs, LineError{Loc: append(append([]any{}, path...), f.name), Msg: "Field required", Type: "missing", Input: o})
				continue
			}
			if err := fromValueRV(fv, fresh.FieldByIndex(f.index), append(path, f.name), errs); err != nil {
				return err
			}
		}
		dst.Set(fresh)
		return nil
	}
	return fmt.Errorf("pyjson: cannot validate into %s", t)
}

// collect moves the problems of a nested ValidationError into errs (their
// locations prefixed with path); other errors are returned.
func collect(err error, path []any, errs *[]LineError) error {
	if err == nil {
		return nil
	}
	ve, ok := err.(*ValidationError)
	if !ok {
		return err
	}
	for _, le := range ve.Errors {
		le.Loc = append(append([]any{}, path...), le.Loc...)
		*errs = append(*errs, le)
	}
	return nil
}

type convErr struct{ msg, typ string }

// errStringUnicode is pydantic's error for a str holding a lone surrogate
// where the validator needs the text as Rust UTF-8 (numbers parsed from
// strings); a plain str field keeps such a string as is.
var errStringUnicode = &convErr{"Input should be a valid string, unable to parse raw data as a unicode string", "string_unicode"}

// hasWTF8Surrogate reports whether s holds a lone surrogate (as Loads keeps
// them, WTF-8 encoded).
func hasWTF8Surrogate(s string) bool {
	for i := strings.IndexByte(s, 0xed); i >= 0; {
		if isWTF8Surrogate(s, i) {
			return true
		}
		j := strings.IndexByte(s[i+1:], 0xed)
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// toBool is pydantic's lax bool validation (LaxBool) with pydantic-core's errors: strings and
// integers it cannot interpret are bool_parsing, every other input (fractions, infinities, huge
// integers, containers, None) bool_type.
func toBool(v any) (bool, *convErr) {
	if b, ok := LaxBool(v); ok {
		return b, nil
	}
	switch x := v.(type) {
	case string:
		if hasWTF8Surrogate(x) {
			return false, errStringUnicode
		}
		return false, &convErr{"Input should be a valid boolean, unable to interpret input", "bool_parsing"}
	case int64, int:
		return false, &convErr{"Input should be a valid boolean, unable to interpret input", "bool_parsing"}
	}
	return false, &convErr{"Input should be a valid boolean", "bool_type"}
}

func toInt(v any) (int64, *convErr) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, &convErr{"Input should be a finite number", "finite_number"}
		}
		if x != math.Trunc(x) {
			return 0, &convErr{"Input should be a valid integer, got a number with a fractional part", "int_from_float"}
		}
		if x < -9.223372036854775e18 || x >= 9.223372036854775e18 {
			return 0, &convErr{"Input should be a valid integer", "int_type"}
		}
		return int64(x), nil
	case *big.Int:
		return 0, &convErr{"Input should be a valid integer", "int_type"}
	case string:
		if hasWTF8Surrogate(x) {
			return 0, errStringUnicode
		}
		n, err := strconv.ParseInt(strings.TrimSpace(strings.ReplaceAll(x, "_", "")), 10, 64)
		if err != nil {
			return 0, &convErr{"Input should be a valid integer, unable to parse string as an integer", "int_parsing"}
		}
		return n, nil
	}
	return 0, &convErr{"Input should be a valid integer", "int_type"}
}

func toFloat(v any) (float64, *convErr) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int64:
		return float64(x), nil
	case int:
		return float64(x), nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case *big.Int:
		f, _ := new(big.Float).SetInt(x).Float64()
		return f, nil
	case string:
		if hasWTF8Surrogate(x) {
			return 0, errStringUnicode
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, &convErr{"Input should be a valid number, unable to parse string as a number", "float_parsing"}
		}
		return f, nil
	}
	return 0, &convErr{"Input should be a valid number", "float_type"}
}

// ToValue converts v (a Go model, Map, slice, scalar or generic value) into
// a generic value tree (*Object, []any, string, int64, float64, bool, nil) —
// pydantic's model_dump(). It goes through the encoder, so it accepts
// exactly what Dumps accepts.
func ToValue(v any) (any, error) {
	b, err := Append(nil, v, Options{UTF8: true})
	if err != nil {
		return nil, err
	}
	return Loads(string(b))
}
