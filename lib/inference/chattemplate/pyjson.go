package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ToJSON re-serializes a JSON value as the chat template's `tojson` filter
// does under transformers: json.dumps(json.loads(raw), ensure_ascii=False)
// with Python's default separators (", " and ": "), object keys in their
// original order (a repeated key keeps its first position and last value, as
// a Python dict does), non-ASCII characters written as UTF-8, control
// characters escaped, integers kept digit for digit and other numbers written
// as Python's repr of the float.
func ToJSON(raw []byte) (string, error) {
	var b strings.Builder
	if err := AppendToJSON(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// AppendToJSON writes ToJSON(raw) to b.
func AppendToJSON(b *strings.Builder, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readValue(dec)
	if err != nil {
		return fmt.Errorf("tojson: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("tojson: trailing data after the JSON value")
	}
	return writeValue(b, v)
}

type member struct {
	key string
	val any
}

// object keeps keys in first-seen order.
type object []member

func readValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("empty input")
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var obj object
			index := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key := kt.(string)
				v, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				if i, dup := index[key]; dup {
					obj[i].val = v
					continue
				}
				index[key] = len(obj)
				obj = append(obj, member{key, v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			if obj == nil {
				obj = object{}
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil // string, json.Number, bool, nil
	}
}

func writeValue(b *strings.Builder, v any) error {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case string:
		writePyString(b, t)
	case json.Number:
		s, err := pyNumber(string(t))
		if err != nil {
			return err
		}
		b.WriteString(s)
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeValue(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case object:
		b.WriteByte('{')
		for i, m := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyString(b, m.key)
			b.WriteString(": ")
			if err := writeValue(b, m.val); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("tojson: unexpected value %T", v)
	}
	return nil
}

// writePyString writes s as json.dumps(s, ensure_ascii=False) does.
func writePyString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteString("\uFFFD")
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xF])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}

// pyNumber formats a JSON number literal as Python's json.dumps(json.loads(lit)):
// integers keep their digits (Python ints are unbounded; -0 becomes 0), other
// numbers become floats written with repr (shortest round-trip digits,
// scientific notation below 1e-4 and from 1e16 on, always a '.0' or
// exponent), and overflow becomes Infinity.
func pyNumber(lit string) (string, error) {
	if !strings.ContainsAny(lit, ".eE") {
		if strings.TrimLeft(lit, "-0") == "" {
			return "0", nil
		}
		return lit, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return "", fmt.Errorf("tojson: number %q: %w", lit, err)
	}
	return PyFloatRepr(f), nil
}

// PyFloatRepr is Python's repr(float) (and json.dumps of a float).
func PyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddddde±XX
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	decpt := exp + 1 // value = 0.digits × 10^decpt
	if decpt > -4 && decpt <= 16 {
		var s string
		switch {
		case decpt <= 0:
			s = "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			s = digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			s = digits[:decpt] + "." + digits[decpt:]
		}
		return sign + s
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := "+"
	if exp < 0 {
		es, exp = "-", -exp
	}
	return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
}
