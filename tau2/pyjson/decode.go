package pyjson

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects accepted by Loads, so a
// hostile input cannot exhaust the stack. Python fails earlier (recursion
// limit ~1000); τ² data nests fewer than 10 levels.
const MaxDepth = 10000

// maxIntDigits mirrors CPython's default sys.int_info.str_digits_check_threshold
// limit (4300 digits): json.loads rejects longer integer literals.
const maxIntDigits = 4300

// SyntaxError is a JSON parse error with Python's json.JSONDecodeError
// wording and position ("Expecting value: line 1 column 1 (char 0)").
type SyntaxError struct {
	Msg  string
	Pos  int // byte offset
	Line int
	Col  int
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s: line %d column %d (char %d)", e.Msg, e.Line, e.Col, e.Pos)
}

// Loads parses JSON text the way Python's json.loads does and returns a
// generic value:
//
//	null -> nil, true/false -> bool, integer -> int64 (or *big.Int when it
//	does not fit), number with fraction or exponent -> float64, NaN /
//	Infinity / -Infinity -> float64, string -> string, array -> []any,
//	object -> *Object (key order kept; a duplicate key keeps its first
//	position and its last value).
//
// Lone UTF-16 surrogates from \uXXXX escapes are kept as their WTF-8 byte
// sequences so that Dumps reproduces them exactly.
func Loads(s string) (any, error) {
	d := decoder{s: s}
	d.skipWS()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.skipWS()
	if d.i != len(d.s) {
		return nil, d.errAt("Extra data", d.i)
	}
	return v, nil
}

// LoadsObject parses JSON text that must be an object.
func LoadsObject(s string) (*Object, error) {
	v, err := Loads(s)
	if err != nil {
		return nil, err
	}
	o, ok := v.(*Object)
	if !ok {
		return nil, fmt.Errorf("pyjson: expected a JSON object, got %s", TypeName(v))
	}
	return o, nil
}

type decoder struct {
	s string
	i int
}

func (d *decoder) errAt(msg string, pos int) error {
	if pos > len(d.s) {
		pos = len(d.s)
	}
	line := 1 + strings.Count(d.s[:pos], "\n")
	col := pos + 1
	if nl := strings.LastIndexByte(d.s[:pos], '\n'); nl >= 0 {
		col = pos - nl
	}
	return &SyntaxError{Msg: msg, Pos: pos, Line: line, Col: col}
}

func (d *decoder) skipWS() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, error) {
	if d.i >= len(d.s) {
		return nil, d.errAt("Expecting value", d.i)
	}
	switch c := d.s[d.i]; {
	case c == '"':
		return d.str()
	case c == '{':
		if depth >= MaxDepth {
			return nil, d.errAt("Maximum nesting depth exceeded", d.i)
		}
		return d.object(depth + 1)
	case c == '[':
		if depth >= MaxDepth {
			return nil, d.errAt("Maximum nesting depth exceeded", d.i)
		}
		return d.array(depth + 1)
	case c == 'n' && strings.HasPrefix(d.s[d.i:], "null"):
		d.i += 4
		return nil, nil
	case c == 't' && strings.HasPrefix(d.s[d.i:], "true"):
		d.i += 4
		return true, nil
	case c == 'f' && strings.HasPrefix(d.s[d.i:], "false"):
		d.i += 5
		return false, nil
	case c == 'N' && strings.HasPrefix(d.s[d.i:], "NaN"):
		d.i += 3
		return math.NaN(), nil
	case c == 'I' && strings.HasPrefix(d.s[d.i:], "Infinity"):
		d.i += 8
		return math.Inf(1), nil
	case c == '-' && strings.HasPrefix(d.s[d.i:], "-Infinity"):
		d.i += 9
		return math.Inf(-1), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, d.errAt("Expecting value", d.i)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (d *decoder) number() (any, error) {
	start := d.i
	j := d.i
	if j < len(d.s) && d.s[j] == '-' {
		j++
	}
	if j >= len(d.s) || !isDigit(d.s[j]) {
		return nil, d.errAt("Expecting value", start)
	}
	if d.s[j] == '0' {
		j++
	} else {
		for j < len(d.s) && isDigit(d.s[j]) {
			j++
		}
	}
	intEnd := j
	isFloat := false
	if j+1 < len(d.s) && d.s[j] == '.' && isDigit(d.s[j+1]) {
		j += 2
		for j < len(d.s) && isDigit(d.s[j]) {
			j++
		}
		isFloat = true
	}
	if j < len(d.s) && (d.s[j] == 'e' || d.s[j] == 'E') {
		k := j + 1
		if k < len(d.s) && (d.s[k] == '+' || d.s[k] == '-') {
			k++
		}
		if k < len(d.s) && isDigit(d.s[k]) {
			for k < len(d.s) && isDigit(d.s[k]) {
				k++
			}
			j = k
			isFloat = true
		}
	}
	lit := d.s[start:j]
	d.i = j
	if isFloat {
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil {
			// Out of range: Python's float() gives ±inf or 0.0; ParseFloat
			// returns the same value together with ErrRange.
			if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
				return nil, d.errAt("Invalid number", start)
			}
		}
		return f, nil
	}
	_ = intEnd
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, nil
	}
	digits := len(lit)
	if lit[0] == '-' {
		digits--
	}
	if digits > maxIntDigits {
		return nil, d.errAt("Exceeds the limit (4300 digits) for integer string conversion", start)
	}
	b, ok := new(big.Int).SetString(lit, 10)
	if !ok {
		return nil, d.errAt("Invalid number", start)
	}
	return b, nil
}

func (d *decoder) str() (string, error) {
	start := d.i
	d.i++ // opening quote
	// Fast path: no escapes.
	j := d.i
	for j < len(d.s) {
		c := d.s[j]
		if c == '"' {
			s := d.s[d.i:j]
			d.i = j + 1
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", d.errAt("Invalid control character at", j)
		}
		j++
	}
	var b strings.Builder
	b.WriteString(d.s[d.i:j])
	d.i = j
	for {
		if d.i >= len(d.s) {
			return "", d.errAt("Unterminated string starting at", start)
		}
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			return b.String(), nil
		case c < 0x20:
			return "", d.errAt("Invalid control character at", d.i)
		case c != '\\':
			b.WriteByte(c)
			d.i++
			continue
		}
		// escape
		if d.i+1 >= len(d.s) {
			return "", d.errAt("Unterminated string starting at", start)
		}
		e := d.s[d.i+1]
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := hex4(d.s, d.i+2)
			if !ok {
				return "", d.errAt("Invalid \\uXXXX escape", d.i+1)
			}
			d.i += 6
			if utf16.IsSurrogate(rune(r)) && r < 0xdc00 && d.i+1 < len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
				if r2, ok := hex4(d.s, d.i+2); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
					b.WriteRune(utf16.DecodeRune(rune(r), rune(r2)))
					d.i += 6
					continue
				}
			}
			writeWTF8(&b, rune(r))
			continue
		default:
			return "", d.errAt("Invalid \\escape", d.i)
		}
		d.i += 2
	}
}

// writeWTF8 writes r, encoding lone surrogates as 3-byte WTF-8 sequences
// (which utf8.EncodeRune would replace with U+FFFD).
func writeWTF8(b *strings.Builder, r rune) {
	if r >= 0xd800 && r <= 0xdfff {
		b.WriteByte(byte(0xe0 | (r >> 12)))
		b.WriteByte(byte(0x80 | ((r >> 6) & 0x3f)))
		b.WriteByte(byte(0x80 | (r & 0x3f)))
		return
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	b.Write(buf[:n])
}

func hex4(s string, i int) (int, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	n := 0
	for k := i; k < i+4; k++ {
		c := s[k]
		switch {
		case c >= '0' && c <= '9':
			n = n*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n*16 + int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n*16 + int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

func (d *decoder) object(depth int) (*Object, error) {
	d.i++ // {
	o := &Object{}
	d.skipWS()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return o, nil
	}
	for {
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, d.errAt("Expecting property name enclosed in double quotes", d.i)
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.skipWS()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, d.errAt("Expecting ':' delimiter", d.i)
		}
		d.i++
		d.skipWS()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		o.Set(k, v)
		d.skipWS()
		if d.i >= len(d.s) {
			return nil, d.errAt("Expecting ',' delimiter", d.i)
		}
		switch d.s[d.i] {
		case '}':
			d.i++
			return o, nil
		case ',':
			d.i++
			d.skipWS()
		default:
			return nil, d.errAt("Expecting ',' delimiter", d.i)
		}
	}
}

func (d *decoder) array(depth int) ([]any, error) {
	d.i++ // [
	out := []any{}
	d.skipWS()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		return out, nil
	}
	for {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		d.skipWS()
		if d.i >= len(d.s) {
			return nil, d.errAt("Expecting ',' delimiter", d.i)
		}
		switch d.s[d.i] {
		case ']':
			d.i++
			return out, nil
		case ',':
			d.i++
			d.skipWS()
		default:
			return nil, d.errAt("Expecting ',' delimiter", d.i)
		}
	}
}
